package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth/jwttest"
)

// Identity tests run the rate-limit site (rlSite: workspaces rlWS and
// rlOtherWS of organisation rlOrg, the key store, llm_ratelimit on /v1)
// with an llm { oidc { … } } block naming an in-process identity
// provider (jwttest.Issuer) on 127.0.0.1. Token users are placed in rlWS,
// so the test key (a key of rlWS) administers their limits.

// idpGroup is the IdP group the gateway admits (groups configured, a
// user in none is refused).
const idpGroup = "llm-users"

// newIdP starts a test issuer, closed when the test ends.
func newIdP(t *testing.T) *jwttest.Issuer {
	t.Helper()
	is := jwttest.New()
	t.Cleanup(is.Close)
	return is
}

// oidcBlock is the llm app's oidc block for is; extra goes inside it.
// Tokens must name is.Audience; users are placed in rlWS and rlOrg.
func oidcBlock(is *jwttest.Issuer, extra string) string {
	return fmt.Sprintf(`oidc {
			issuer %s
			audience %s
			client_id %s
			egress_allow loopback
			workspace_id %s
			organisation_id %s
			group %s {
				scopes completions.write
			}
			%s
		}`, is.URL, is.Audience, is.ClientID, rlWS, rlOrg, idpGroup, extra)
}

// loadIdP loads the rate-limit site with is as the identity provider.
// limit is llm_ratelimit's body ("" for none: no llm_ratelimit), llm
// more of the llm block (a ledger).
func loadIdP(t *testing.T, is *jwttest.Issuer, oidcExtra, limit, llm string) {
	t.Helper()
	loadRL(t, rlSite{Limit: limit, NoLimiter: limit == "", Redis: oidcBlock(is, oidcExtra) + "\n\t\t" + llm})
}

// userToken is an access token of is for sub, in idpGroup, valid 5 m.
func userToken(is *jwttest.Issuer, sub string) string {
	c := is.Std(sub, is.Audience, 5*time.Minute)
	c["groups"] = []string{idpGroup}
	return is.Mint(c)
}

// tokenChat is rlChat with an IdP token as the gateway key.
func tokenChat(t *testing.T, token, upURL string) (*http.Response, []byte) {
	t.Helper()
	return rlChat(t, gatewayURL(), token, upURL, "")
}

// tokenClient is the official OpenAI SDK sending token as the gateway key
// (x-gateway-api-key) beside the provider's key, routed to upURL.
func tokenClient(token, upURL string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(gatewayURL()+"/"),
		option.WithAPIKey("sk-test-provider"),
		option.WithHeader("x-gateway-api-key", token),
		option.WithHeader("x-gateway-provider", "openai"),
		option.WithHeader("x-gateway-custom-host", upURL),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
}

// sqliteLedger is the llm block's ledger option for a new SQLite file,
// in a directory removed when the process ends, not the test: the site
// keeps running (and may write) until the next test loads another.
func sqliteLedger(t *testing.T) string {
	return fmt.Sprintf("ledger %q", filepath.Join(storageDir(t), "ledger.db"))
}

// statusesOf sends n chats with token and returns their statuses.
func statusesOf(t *testing.T, n int, token, upURL string) string {
	t.Helper()
	var got []string
	for range n {
		resp, _ := tokenChat(t, token, upURL)
		got = append(got, fmt.Sprint(resp.StatusCode))
	}
	return strings.Join(got, " ")
}
