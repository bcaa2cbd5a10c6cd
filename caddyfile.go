package llmgateway

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func init() {
	httpcaddyfile.RegisterGlobalOption(app.ID, parseApp)
	httpcaddyfile.RegisterHandlerDirective("llm_gateway", parseGateway)
	httpcaddyfile.RegisterDirectiveOrder("llm_gateway", httpcaddyfile.Before, "reverse_proxy")
}

// parseApp parses the global `llm` option:
//
//	llm {
//		api_key <name> <key | {env.VAR} | sha256:<hex>> {
//			workspace_id    <uuid>
//			organisation_id <uuid>
//		}
//		virtual_key <name> {
//			provider <slug>
//			<any provider setting by its config name> <value>
//			deployment <deployment_id> <alias> <api_version> [default]
//		}
//		config <id> <file path | inline JSON object>
//		guardrail <id> <file path | inline JSON object>
//		prompts <dir of prompt files>
//		semantic_cache { … }  (see parseSemanticCache)
//		max_held_bytes <size>
//		responses_retention <duration>
//		batches { … }  (see parseBatches)
//		price_catalog <LiteLLM-format price file>
//		redis <host:port> {
//			username <user>
//			password <password | {env.VAR}>
//			db       <n>
//			fail_open | fail_closed
//		}
//	}
func parseApp(d *caddyfile.Dispenser, existing any) (any, error) {
	a, _ := existing.(*app.App)
	if existing != nil {
		if ha, ok := existing.(httpcaddyfile.App); ok {
			a = new(app.App)
			if err := json.Unmarshal(ha.Value, a); err != nil {
				return nil, err
			}
		}
	}
	if a == nil {
		a = new(app.App)
	}
	d.Next() // option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "api_key":
			var k app.APIKey
			if !d.Args(&k.Name, &k.Key) {
				return nil, d.ArgErr()
			}
			for d.NextBlock(1) {
				switch d.Val() {
				case "workspace_id":
					if !d.Args(&k.WorkspaceID) {
						return nil, d.ArgErr()
					}
				case "organisation_id", "organization_id":
					if !d.Args(&k.OrganisationID) {
						return nil, d.ArgErr()
					}
				default:
					return nil, d.Errf("unknown api_key option %q", d.Val())
				}
			}
			a.APIKeys = append(a.APIKeys, k)
		case "virtual_key":
			var name string
			if !d.Args(&name) {
				return nil, d.ArgErr()
			}
			s, err := parseSettings(d)
			if err != nil {
				return nil, err
			}
			if a.VirtualKeys == nil {
				a.VirtualKeys = map[string]*providers.Settings{}
			}
			a.VirtualKeys[name] = s
		case "config":
			var id, val string
			if !d.Args(&id, &val) {
				return nil, d.ArgErr()
			}
			if a.Configs == nil {
				a.Configs = map[string]json.RawMessage{}
			}
			if strings.HasPrefix(strings.TrimSpace(val), "{\"") || strings.TrimSpace(val) == "{}" {
				if !json.Valid([]byte(val)) {
					return nil, d.Errf("config %q: inline value is not valid JSON", id)
				}
				a.Configs[id] = json.RawMessage(val)
			} else {
				a.Configs[id] = caddyconfig.JSON(val, nil)
			}
		case "semantic_cache":
			if err := parseSemanticCache(d, a); err != nil {
				return nil, err
			}
		case "guardrail":
			if err := parseGuardrail(d, a); err != nil {
				return nil, err
			}
		case "price_catalog":
			if !d.Args(&a.PriceCatalog) || d.NextArg() {
				return nil, d.ArgErr()
			}
		case "prompts":
			var dir string
			if !d.Args(&dir) || d.NextArg() {
				return nil, d.ArgErr()
			}
			a.Prompts = &app.PromptsConfig{Dir: dir}
		case "batches":
			if err := parseBatches(d, a); err != nil {
				return nil, err
			}
		case "max_held_bytes":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<50 {
				return nil, d.Errf("max_held_bytes: invalid size %q", v)
			}
			a.MaxHeldBytes = int64(n)
		case "responses_retention":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return nil, d.Errf("responses_retention must be a positive duration")
			}
			a.ResponsesRetention = caddy.Duration(dur)
		case "redis":
			r := &app.RedisConfig{}
			if !d.Args(&r.Address) {
				return nil, d.ArgErr()
			}
			for d.NextBlock(1) {
				switch d.Val() {
				case "username":
					if !d.Args(&r.Username) {
						return nil, d.ArgErr()
					}
				case "password":
					if !d.Args(&r.Password) {
						return nil, d.ArgErr()
					}
				case "db":
					var db string
					if !d.Args(&db) {
						return nil, d.ArgErr()
					}
					n, err := strconv.Atoi(db)
					if err != nil || n < 0 {
						return nil, d.Errf("redis db must be a non-negative integer")
					}
					r.DB = n
				case "fail_open":
					r.FailOpen = true
				case "fail_closed":
					r.FailOpen = false
				default:
					return nil, d.Errf("unknown redis option %q", d.Val())
				}
			}
			a.Redis = r
		default:
			return nil, d.Errf("unknown llm option %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: app.ID, Value: caddyconfig.JSON(a, nil)}, nil
}

// parseSettings reads a virtual key block: each line is a provider setting
// named as in the configuration object.
func parseSettings(d *caddyfile.Dispenser) (*providers.Settings, error) {
	fields := map[string]any{}
	var deployments []providers.Deployment
	for d.NextBlock(1) {
		key := d.Val()
		if key == "deployment" {
			var dep providers.Deployment
			if !d.Args(&dep.DeploymentID, &dep.Alias, &dep.APIVersion) {
				return nil, d.ArgErr()
			}
			if d.NextArg() {
				if d.Val() != "default" {
					return nil, d.Errf("deployment: expected 'default', got %q", d.Val())
				}
				dep.IsDefault = true
			}
			deployments = append(deployments, dep)
			continue
		}
		var val string
		if !d.Args(&val) {
			return nil, d.ArgErr()
		}
		if key == "cloudc_service_account_json" {
			if !json.Valid([]byte(val)) {
				return nil, d.Errf("cloudc_service_account_json must be an inline JSON object")
			}
			fields[key] = json.RawMessage(val)
			continue
		}
		fields[key] = val
	}
	raw, _ := json.Marshal(fields)
	s := new(providers.Settings)
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return nil, d.Errf("virtual key: %v", err)
	}
	s.Deployments = deployments
	return s, nil
}

// parseGateway parses the llm_gateway directive:
//
//	llm_gateway [<matcher>] {
//		max_request_body  <size>
//		max_response_body <size>
//		cache_size        <size>
//		trace_content
//		custom_host_allow <loopback|private|link_local|any|CIDR>...
//		transport http {
//			<reverse_proxy http transport options>
//		}
//	}
func parseGateway(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(handlers.Gateway)
	h.Next() // directive name
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	for h.NextBlock(0) {
		switch h.Val() {
		case "max_request_body":
			var v string
			if !h.Args(&v) {
				return nil, h.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				return nil, h.Errf("max_request_body: invalid size %q", v)
			}
			g.MaxRequestBody = int64(n)
		case "max_response_body":
			var v string
			if !h.Args(&v) {
				return nil, h.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				return nil, h.Errf("max_response_body: invalid size %q", v)
			}
			g.MaxResponseBody = int64(n)
		case "cache_size":
			var v string
			if !h.Args(&v) {
				return nil, h.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 {
				return nil, h.Errf("cache_size: invalid size %q", v)
			}
			g.CacheSize = int64(n)
		case "trace_content":
			if h.NextArg() {
				return nil, h.ArgErr()
			}
			g.TraceContent = true
		case "custom_host_allow":
			args := h.RemainingArgs()
			if len(args) == 0 {
				return nil, h.ArgErr()
			}
			g.CustomHostAllow = append(g.CustomHostAllow, args...)
		case "transport":
			var name string
			if !h.Args(&name) {
				return nil, h.ArgErr()
			}
			if name != "http" {
				return nil, h.Errf("transport: only the http transport is supported, got %q", name)
			}
			unm, err := caddyfile.UnmarshalModule(h.Dispenser, "http.reverse_proxy.transport."+name)
			if err != nil {
				return nil, err
			}
			g.Transport = caddyconfig.JSONModuleObject(unm, "protocol", name, nil)
		default:
			return nil, h.Errf("unknown llm_gateway option %q", h.Val())
		}
	}
	return g, nil
}
