package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// oidcState adds "oidc": callers authenticated by an identity provider's
// tokens (docs/identity.md).
type oidcState struct {
	// OIDC, when set, admits an IdP's JWTs wherever a gateway key is
	// accepted.
	OIDC *jwtauth.Config `json:"oidc,omitempty"`

	tokens *jwtauth.Authenticator
}

// provisionOIDC builds the token authenticator. The IdP is the
// operator's, but its discovery document names further addresses
// (jwks_uri, userinfo, token endpoint), so every call to it goes through
// the egress guard: public addresses only, unless egress_allow says
// otherwise.
func (a *App) provisionOIDC() error {
	// Reserved with or without oidc, as the record store reserves them:
	// a key named so before oidc is turned on would share a user's
	// counters after.
	for _, k := range a.APIKeys {
		if identity.ReservedName(k.Name) {
			return fmt.Errorf("api key %q: a key name may not start with %q (identity-provider users are named so)", k.Name, identity.UserPrefix)
		}
	}
	if a.OIDC == nil {
		return nil
	}
	cfg := *a.OIDC
	repl := caddy.NewReplacer()
	if literalSecret(cfg.ClientSecret) {
		a.logger.Warn("oidc: a literal client_secret is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR} or {file.path}")
	}
	cfg.ClientSecret = repl.ReplaceAll(cfg.ClientSecret, "")
	cfg.Issuer = repl.ReplaceAll(cfg.Issuer, "")
	for _, f := range []struct{ name, v string }{{"workspace_id", cfg.WorkspaceID}, {"organisation_id", cfg.OrganisationID}} {
		if _, err := uuid.Parse(f.v); f.v != "" && err != nil {
			return fmt.Errorf("oidc: %s must be a UUID", f.name)
		}
	}
	for _, g := range cfg.Groups {
		if _, err := uuid.Parse(g.WorkspaceID); g.WorkspaceID != "" && err != nil {
			return fmt.Errorf("oidc: group %q: workspace_id must be a UUID", g.Name)
		}
		for _, sc := range g.Scopes {
			if !keys.ValidScope(sc) {
				return fmt.Errorf("oidc: group %q: unknown scope %q", g.Name, sc)
			}
		}
	}
	guard, err := upstream.NewGuard(cfg.EgressAllow)
	if err != nil {
		return fmt.Errorf("oidc: egress_allow: %v", err)
	}
	a.tokens, err = jwtauth.New(cfg, guardrails.NewEgressClient(guard))
	if err == nil {
		a.watchUsers()
	}
	return err
}

// Tokens returns the IdP token authenticator, nil without "oidc".
func (a *App) Tokens() *jwtauth.Authenticator { return a.tokens }

// authenticateToken is Authenticate's road for an IdP token.
func (a *App) authenticateToken(presented string) (*identity.Caller, bool) {
	id, r := a.tokens.Authenticate(context.Background(), presented)
	return id, r == nil
}

// tokenError is AuthError for an IdP token (nil when it is not one): the
// refusal, remembered from Authenticate, with its own code.
func (a *App) tokenError(presented string) *apierror.Error {
	if a.tokens == nil || !jwtauth.LooksLikeJWT(presented) {
		return nil
	}
	_, r := a.tokens.Authenticate(context.Background(), presented)
	if r == nil {
		return nil
	}
	return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "the identity provider token is refused: "+r.Message).WithCode(r.Code)
}
