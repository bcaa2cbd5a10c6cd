package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestModelAliasesThroughConfigsAPI: a config saved through the configs
// API may carry aliases, public model names a plain OpenAI client (no
// routing header) asks for to be routed by it; an alias is held by one
// config of a workspace (409 alias_taken on create and update), and one of
// the Caddyfile's may not be claimed and wins over a stored one after a
// reload; /v1/models lists, per key, the aliases of its workspace; another
// workspace's aliases are neither listed nor routed; a disabled config's
// alias routes nothing.
func TestModelAliasesThroughConfigsAPI(t *testing.T) {
	a, b, c := newFakeOpenAI(t), newFakeOpenAI(t), newFakeOpenAI(t)
	vk := func(name string, up *fakeOpenAI) string {
		return fmt.Sprintf("virtual_key %s {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}\n\t\t", name, up.URL)
	}
	operator := fmt.Sprintf("model ops-default {\n\t\t\tconfig `{\"provider\":\"openai\",\"api_key\":\"sk-test-provider\",\"custom_host\":%q,\"override_params\":{\"model\":\"gpt-4.1\"}}`\n\t\t}", c.URL)
	s := newKeysSite(t, vk("fake-a", a)+vk("fake-b", b)+operator)
	s.load(t)
	ctx := context.Background()
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key),
			option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second), option.WithHTTPClient(reloadSafeClient))
	}
	group := func(vk, model string) string {
		return fmt.Sprintf(`{"strategy":{"mode":"loadbalance"},"targets":[{"virtual_key":%q,"override_params":{"model":%q}}]}`, vk, model)
	}
	sentTo := func(up *fakeOpenAI, model, alias string) {
		t.Helper()
		before := up.count()
		plain := client(gatewayKey) // the test key, of keysWorkspace (built per call: a reload moves the port)
		resp, err := plain.Chat.Completions.New(ctx, chatParams(alias))
		if err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		if resp.Choices[0].Message.Content == "" || up.count() != before+1 {
			t.Fatalf("%s: the alias's target saw %d requests", alias, up.count()-before)
		}
		var sent struct{ Model string }
		_ = json.Unmarshal(up.last().Body, &sent)
		if sent.Model != model {
			t.Fatalf("%s: upstream got model %q, want %q", alias, sent.Model, model)
		}
	}
	refused := func(key, alias string, status int) {
		t.Helper()
		var apiErr *openai.Error
		cl := client(key)
		if _, err := cl.Chat.Completions.New(ctx, chatParams(alias)); !errors.As(err, &apiErr) || apiErr.StatusCode != status {
			t.Fatalf("%s: want %d, got %v", alias, status, err)
		}
	}
	models := func(key string) []string {
		t.Helper()
		cl := client(key)
		page, err := cl.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}

	var team, other struct{ ID, Slug string }
	as(t, keysAdminKey, "POST", "/configs", `{"name":"team","workspace_id":"`+keysWorkspace+`","aliases":["team-default","team-fast"],"config":`+group("fake-a", "gpt-4o-mini")+`}`, 200, &team)
	sentTo(a, "gpt-4o-mini", "team-default")
	sentTo(a, "gpt-4o-mini", "team-fast")
	if got := models(gatewayKey); !slices.Equal(got, []string{"ops-default", "team-default", "team-fast"}) {
		t.Fatalf("models of the workspace's key: %v", got)
	}
	var view struct{ Aliases []string }
	as(t, keysAdminKey, "GET", "/configs/"+team.Slug, "", 200, &view)
	if !slices.Equal(view.Aliases, []string{"team-default", "team-fast"}) {
		t.Fatalf("the config's view: aliases %v", view.Aliases)
	}

	// One holder per workspace; the Caddyfile's are the operator's.
	wantCode := func(raw []byte, code string) {
		t.Helper()
		if got := errCode(t, raw); got != code {
			t.Fatalf("code %q, want %q: %s", got, code, raw)
		}
	}
	wantCode(as(t, keysAdminKey, "POST", "/configs", `{"name":"clash","workspace_id":"`+keysWorkspace+`","aliases":["team-default"],"config":`+group("fake-b", "gpt-4o")+`}`, 409, nil), "alias_taken")
	wantCode(as(t, keysAdminKey, "POST", "/configs", `{"name":"clash","workspace_id":"`+keysWorkspace+`","aliases":["ops-default"],"config":`+group("fake-b", "gpt-4o")+`}`, 409, nil), "alias_taken")
	for _, bad := range []string{`["two words"]`, `["x","x"]`, `[""]`, `"team"`, `[1]`} {
		as(t, keysAdminKey, "POST", "/configs", `{"name":"bad","workspace_id":"`+keysWorkspace+`","aliases":`+bad+`,"config":`+group("fake-b", "gpt-4o")+`}`, 400, nil)
	}
	as(t, keysAdminKey, "POST", "/configs", `{"name":"other","workspace_id":"`+keysWorkspace+`","config":`+group("fake-b", "gpt-4o")+`}`, 200, &other)
	wantCode(as(t, keysAdminKey, "PUT", "/configs/"+other.Slug, `{"aliases":["team-fast"]}`, 409, nil), "alias_taken")
	sentTo(a, "gpt-4o-mini", "team-fast")

	// The alias moves: freed by one config, taken by the other.
	as(t, keysAdminKey, "PUT", "/configs/"+team.Slug, `{"aliases":["team-default"]}`, 200, nil)
	refused(gatewayKey, "team-fast", 400) // no alias, no routing header
	as(t, keysAdminKey, "PUT", "/configs/"+other.Slug, `{"aliases":["team-fast"]}`, 200, nil)
	sentTo(b, "gpt-4o", "team-fast")
	sentTo(a, "gpt-4o-mini", "team-default")

	// Another workspace sees none of them.
	var elsewhere createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"elsewhere","workspace_id":"`+keysOtherWS+`","scopes":["completions.write"]}`, 200, &elsewhere)
	if got := models(elsewhere.Key); !slices.Equal(got, []string{"ops-default"}) {
		t.Fatalf("models of another workspace's key: %v", got)
	}
	refused(elsewhere.Key, "team-default", 400)

	// A disabled config's alias routes nothing and is not listed.
	as(t, keysAdminKey, "PUT", "/configs/"+other.Slug, `{"status":"disabled"}`, 200, nil)
	refused(gatewayKey, "team-fast", 400)
	if got := models(gatewayKey); !slices.Equal(got, []string{"ops-default", "team-default"}) {
		t.Fatalf("models with team-fast's config disabled: %v", got)
	}

	// A Caddyfile alias added later wins over the stored one.
	s.LLM += "\n\t\tmodel team-default {\n\t\t\tconfig `" + fmt.Sprintf(`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q,"override_params":{"model":"gpt-4.1"}}`, c.URL) + "`\n\t\t}"
	s.load(t)
	sentTo(c, "gpt-4.1", "team-default")
	if got := models(gatewayKey); !slices.Equal(got, []string{"ops-default", "team-default"}) {
		t.Fatalf("models with the alias in both: %v", got)
	}
}
