package app

import (
	"fmt"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
	"golang.org/x/oauth2/clientcredentials"
)

// MCPOAuth is an MCP server's OAuth 2 client credentials grant (RFC 6749
// §4.4): the gateway obtains an access token from the token endpoint with
// its own client id and secret, sends it as Authorization: Bearer, and
// obtains another when it expires or the server answers 401. The caller's
// gateway key is never sent anywhere.
type MCPOAuth struct {
	// TokenURL is the authorization server's token endpoint (http or
	// https; reached through the route's egress policy).
	TokenURL string `json:"token_url"`
	// ClientID and ClientSecret are the gateway's client credentials;
	// give the secret as an {env.VAR} placeholder (a literal is visible
	// in GET /config/).
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	// Scopes are requested with the token.
	Scopes []string `json:"scopes,omitempty"`
	// Resource is the RFC 8707 resource indicator sent with the token
	// request (the MCP server's canonical URI, as the MCP authorization
	// specification asks); empty sends none.
	Resource string `json:"resource,omitempty"`
}

// resolveMCPOAuth checks o and resolves its placeholders.
func (a *App) resolveMCPOAuth(repl *caddy.Replacer, server string, o *MCPOAuth) (*clientcredentials.Config, error) {
	raw, err := resolvePlaceholders(repl, "oauth_client_credentials token_url", o.TokenURL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("oauth_client_credentials: token_url must be an http:// or https:// URL without credentials or fragment")
	}
	id, err := resolvePlaceholders(repl, "oauth_client_credentials client_id", o.ClientID)
	if err != nil {
		return nil, err
	}
	if literalSecret(o.ClientSecret) {
		a.logger.Warn("MCP server OAuth client secret is a literal value: it is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR}",
			zap.String("mcp_server", server))
	}
	secret, err := resolvePlaceholders(repl, "oauth_client_credentials client_secret", o.ClientSecret)
	if err != nil {
		return nil, err
	}
	if id == "" || secret == "" {
		return nil, fmt.Errorf("oauth_client_credentials: client_id and client_secret are required")
	}
	c := &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: u.String(), Scopes: o.Scopes}
	if o.Resource != "" {
		res, err := url.Parse(o.Resource)
		if err != nil || !res.IsAbs() || res.Fragment != "" {
			return nil, fmt.Errorf("oauth_client_credentials: resource must be an absolute URI without a fragment")
		}
		c.EndpointParams = url.Values{"resource": {o.Resource}}
	}
	return c, nil
}

// unmarshalMCPOAuth reads the oauth_client_credentials block:
//
//	oauth_client_credentials {
//		token_url     <http(s) URL>
//		client_id     <id>
//		client_secret <secret>        # an {env.VAR} placeholder
//		scopes        <scope>...      # may repeat
//		resource      <URI>           # RFC 8707 resource indicator
//	}
func unmarshalMCPOAuth(d *caddyfile.Dispenser) (*MCPOAuth, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	o := &MCPOAuth{}
	for d.NextBlock(2) {
		switch opt := d.Val(); opt {
		case "token_url", "client_id", "client_secret", "resource":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.ArgErr()
			}
			switch opt {
			case "token_url":
				o.TokenURL = v
			case "client_id":
				o.ClientID = v
			case "client_secret":
				o.ClientSecret = v
			default:
				o.Resource = v
			}
		case "scopes":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return nil, d.ArgErr()
			}
			o.Scopes = append(o.Scopes, args...)
		default:
			return nil, d.Errf("unknown oauth_client_credentials option %q", opt)
		}
	}
	if o.TokenURL == "" || o.ClientID == "" || o.ClientSecret == "" {
		return nil, d.Err("oauth_client_credentials: token_url, client_id and client_secret are required")
	}
	return o, nil
}
