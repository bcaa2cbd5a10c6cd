package app

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
)

// unmarshalOIDC parses the llm option's oidc block (docs/identity.md):
//
//	oidc {
//		issuer          <url>                 # discovery at <url>/.well-known/openid-configuration
//		audience        <aud>...              # default: client_id
//		client_id       <id>                  # the console's sign-in client
//		client_secret   <{env.VAR} | {file.path}>
//		redirect_url    <url>                 # default: <scheme>://<host><console>/oidc/callback
//		allowed_domains <domain>...           # email (or hd) domains admitted
//		algorithms      <alg>...              # default: RS*, PS*, ES*, EdDSA (never none or HS*)
//		clock_skew      <duration>            # default 30s, at most 5m
//		cache_ttl       <duration>            # default 1m, at most 1h
//		egress_allow    <loopback | private | link_local | CIDR>...
//		userinfo                              # read the mapped claims from the userinfo endpoint
//		workspace_id    <uuid>                # users no group or claim places
//		organisation_id <uuid>
//		claims {
//			workspace <claim>
//			scopes    <claim>
//			models    <claim>
//			groups    <claim>               # default "groups"
//		}
//		group <name> {                      # may repeat; the first a user is in places them
//			type         workspace | organisation
//			workspace_id <uuid>
//			scopes       <scope>...
//			models       <glob>...
//			config       <id>                 # key defaults
//			virtual_key  <name>
//		}
//	}
func (a *App) unmarshalOIDC(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.OIDC != nil {
		return d.Err("oidc may be given once")
	}
	c := new(jwtauth.Config)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "issuer", "client_id", "client_secret", "redirect_url", "workspace_id", "organisation_id", "organization_id":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			*map[string]*string{"issuer": &c.Issuer, "client_id": &c.ClientID, "client_secret": &c.ClientSecret,
				"redirect_url": &c.RedirectURL, "workspace_id": &c.WorkspaceID, "organisation_id": &c.OrganisationID,
				"organization_id": &c.OrganisationID}[opt] = v
		case "audience", "allowed_domains", "algorithms", "egress_allow":
			vs := d.RemainingArgs()
			if len(vs) == 0 {
				return d.ArgErr()
			}
			dst := map[string]*[]string{"audience": &c.Audience, "allowed_domains": &c.AllowedDomains,
				"algorithms": &c.Algorithms, "egress_allow": &c.EgressAllow}[opt]
			*dst = append(*dst, vs...)
		case "clock_skew", "cache_ttl":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			dur, perr := caddy.ParseDuration(v)
			if perr != nil {
				return d.Errf("%s: %v", opt, perr)
			}
			if opt == "clock_skew" {
				c.ClockSkew = caddy.Duration(dur)
			} else {
				c.CacheTTL = caddy.Duration(dur)
			}
		case "userinfo":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.UserInfo = true
		case "claims":
			err = unmarshalOIDCClaims(d, &c.Claims)
		case "group":
			err = unmarshalOIDCGroup(d, c)
		default:
			return d.Errf("unknown oidc option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	if c.Issuer == "" {
		return d.Err("oidc: issuer is required")
	}
	a.OIDC = c
	return nil
}

func unmarshalOIDCClaims(d *caddyfile.Dispenser, c *jwtauth.Claims) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		dst := map[string]*string{"workspace": &c.Workspace, "scopes": &c.Scopes, "models": &c.Models, "groups": &c.Groups}[opt]
		if dst == nil {
			return d.Errf("unknown oidc claims option %q", opt)
		}
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

func unmarshalOIDCGroup(d *caddyfile.Dispenser, c *jwtauth.Config) error {
	var g jwtauth.Group
	if !d.Args(&g.Name) || d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "type", "workspace_id", "config", "virtual_key":
			dst := map[string]*string{"type": &g.Type, "workspace_id": &g.WorkspaceID, "config": &g.ConfigID, "virtual_key": &g.VirtualKey}[opt]
			if !d.Args(dst) || d.NextArg() {
				return d.ArgErr()
			}
		case "scopes", "models":
			vs := d.RemainingArgs()
			if len(vs) == 0 {
				return d.ArgErr()
			}
			if opt == "scopes" {
				g.Scopes = append(g.Scopes, vs...)
			} else {
				g.Models = append(g.Models, vs...)
			}
		default:
			return d.Errf("unknown oidc group option %q", opt)
		}
	}
	c.Groups = append(c.Groups, g)
	return nil
}
