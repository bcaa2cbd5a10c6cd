package app

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonarg"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// The app and its global Caddyfile option are registered together, so
// importing the package is enough to use either.
func init() {
	caddy.RegisterModule(App{})
	httpcaddyfile.RegisterGlobalOption(ID, parseGlobalOption)
}

// parseGlobalOption turns the global `llm` option into the llm app. The
// option may be given more than once; each block adds to the ones before.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	a := new(App)
	if prev, ok := existing.(httpcaddyfile.App); ok {
		if err := json.Unmarshal(prev.Value, a); err != nil {
			return nil, err
		}
	}
	if err := a.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: ID, Value: caddyconfig.JSON(a, nil)}, nil
}

// UnmarshalCaddyfile parses the global `llm` option, adding to what a is
// already set to:
//
//	llm {
//		api_key <name> <key | {env.VAR} | sha256:<hex>> {
//			workspace_id    <uuid>
//			organisation_id <uuid>
//			type            workspace | organisation
//			scopes          <scope>...             # may repeat; * is every scope
//		}
//		keys {
//			secret                  <{env.VAR} | {file.path}>   # HMAC secret, >= 32 bytes
//			encryption_key          <{env.VAR} | {file.path}>   # 32 bytes, hex or base64
//			previous_encryption_key <{env.VAR} | {file.path}>   # may repeat
//		}
//		virtual_key <name> {
//			provider <slug>
//			<any provider setting by its config name> <value>
//			deployment <deployment_id> <alias> <api_version> [default]
//		}
//		config    <id> <file path | inline JSON object>
//		model <alias> {                      # a model name that routes by a config
//			config <saved config id | inline JSON object>
//		}
//		guardrail <id> <file path | inline JSON object>
//		prompts <dir of prompt files>
//		semantic_cache {
//			embedding     <virtual_key> <model>
//			threshold     <0 < similarity <= 1>   # default 0.95
//			max_memory    <size>                   # default 256MiB
//			max_entries   <n per partition>        # default 10000
//			embed_timeout <duration>               # default 5s
//		}
//		max_held_bytes <size>
//		responses_retention <duration>
//		batches {
//			max_file_size <size>   # largest stored file (default 100MiB)
//			max_active    <n>      # batches queued or running (default 100)
//			max_running   <n>      # batches dispatching at once (default 8)
//			lease         <d>      # with Redis: a batch's lease (default 10s, 2s–5m)
//		}
//		price_catalog <LiteLLM-format price file>
//		mcp_server <name> { url …; header …; bearer …; … }   # may repeat (mcp.go)
//		oidc { issuer …; audience …; client_id …; group <name> { … } … }  # oidc_caddyfile.go
//		api <keys|usage_limits|ledger|prompts|rate_limits|feedback>...  # management API modules (default all)
//		ledger [<postgres:// URL | SQLite file path>] {
//			retention <duration>   # default 90d
//			queue     <n>          # records waiting for the writer
//			spool     <dir | off> [<max size>] # records waiting on disk while the database is away
//		}
//		budgets {
//			alert_webhook <url>     # threshold, exhausted and reset events, once per limit, group and period
//			alert_secret  <secret>  # signs every call (x-gateway-signature); required with alert_webhook
//			alert_allow   <loopback | private | CIDR>...
//			max_wait      <duration> # default 10s
//		}
//		redis [<host:port>] {
//			cluster  <host:port>...              # Redis Cluster seed nodes, instead of the address
//			sentinel <master> <host:port>...     # Redis Sentinel, instead of the address
//			sentinel_username <user>
//			sentinel_password <password | {env.VAR}>
//			username <user>
//			password <password | {env.VAR}>
//			db       <n>
//			tls {                                # bare `tls` verifies with the system roots
//				ca          <PEM file>
//				cert        <PEM file>           # client certificate, with key
//				key         <PEM file>
//				server_name <name>
//			}
//			key_prefix <prefix>                  # starts every key and channel
//			fail_open | fail_closed
//		}
//	}
//
// organization_id is accepted for organisation_id. A config or guardrail
// value is inline when it is a JSON object (it must then be valid) and a
// file path otherwise; the file is read when the config loads. Saved
// configs, guardrails and the semantic cache are checked then too, where
// the other options are.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var err error
		switch d.Val() {
		case "api_key":
			err = a.unmarshalAPIKey(d)
		case "virtual_key":
			err = a.unmarshalVirtualKey(d)
		case "config":
			err = a.unmarshalConfig(d)
		case "model":
			err = a.unmarshalModel(d)
		case "guardrail":
			err = a.unmarshalGuardrail(d)
		case "semantic_cache":
			err = a.unmarshalSemanticCache(d)
		case "price_catalog":
			if !d.Args(&a.PriceCatalog) || d.NextArg() {
				return d.ArgErr()
			}
		case "prompts":
			var dir string
			if !d.Args(&dir) || d.NextArg() {
				return d.ArgErr()
			}
			a.Prompts = &PromptsConfig{Dir: dir}
		case "batches":
			err = a.unmarshalBatches(d)
		case "max_held_bytes":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			n, perr := humanize.ParseBytes(v)
			if perr != nil || n == 0 || n > 1<<50 {
				return d.Errf("max_held_bytes: invalid size %q", v)
			}
			a.MaxHeldBytes = int64(n)
		case "responses_retention":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			dur, perr := caddy.ParseDuration(v)
			if perr != nil || dur <= 0 {
				return d.Errf("responses_retention must be a positive duration")
			}
			a.ResponsesRetention = caddy.Duration(dur)
		case "redis":
			err = a.unmarshalRedis(d)
		case "ledger":
			err = a.unmarshalLedger(d)
		case "records":
			err = a.unmarshalRecords(d)
		case "budgets":
			err = a.unmarshalBudgets(d)
		case "keys":
			err = a.unmarshalKeys(d)
		case "mcp_server":
			err = a.unmarshalMCPServer(d)
		case "oidc":
			err = a.unmarshalOIDC(d)
		case "api":
			err = a.unmarshalAPI(d)
		default:
			return d.Errf("unknown llm option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmarshalAPIKey reads `api_key <name> <key> [{ … }]`.
func (a *App) unmarshalAPIKey(d *caddyfile.Dispenser) error {
	var k APIKey
	if !d.Args(&k.Name, &k.Key) {
		return d.ArgErr()
	}
	for d.NextBlock(1) {
		switch d.Val() {
		case "workspace_id":
			if !d.Args(&k.WorkspaceID) {
				return d.ArgErr()
			}
		case "organisation_id", "organization_id":
			if !d.Args(&k.OrganisationID) {
				return d.ArgErr()
			}
		case "type":
			if !d.Args(&k.Type) || d.NextArg() {
				return d.ArgErr()
			}
			if k.Type == "organization" {
				k.Type = "organisation"
			}
			if k.Type != "workspace" && k.Type != "organisation" {
				return d.Errf("api_key %q: type must be workspace or organisation", k.Name)
			}
		case "scopes":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			k.Scopes = append(k.Scopes, args...)
		default:
			return d.Errf("unknown api_key option %q", d.Val())
		}
	}
	a.APIKeys = append(a.APIKeys, k)
	return nil
}

// unmarshalKeys reads the `keys { … }` block.
func (a *App) unmarshalKeys(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Keys == nil {
		a.Keys = new(KeysConfig)
	}
	for d.NextBlock(1) {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "secret":
			a.Keys.Secret = v
		case "encryption_key":
			a.Keys.EncryptionKey = v
		case "previous_encryption_key":
			a.Keys.PreviousEncryptionKeys = append(a.Keys.PreviousEncryptionKeys, v)
		default:
			return d.Errf("unknown keys option %q", opt)
		}
	}
	return nil
}

// unmarshalVirtualKey reads `virtual_key <name> { … }`: each line is a
// provider setting named as in the configuration object, decoded strictly
// so a misspelt setting is an error with its line.
func (a *App) unmarshalVirtualKey(d *caddyfile.Dispenser) error {
	var name string
	if !d.Args(&name) {
		return d.ArgErr()
	}
	fields := map[string]any{}
	var deployments []providers.Deployment
	for d.NextBlock(1) {
		key := d.Val()
		if key == "deployment" {
			var dep providers.Deployment
			if !d.Args(&dep.DeploymentID, &dep.Alias, &dep.APIVersion) {
				return d.ArgErr()
			}
			if d.NextArg() {
				if d.Val() != "default" {
					return d.Errf("deployment: expected 'default', got %q", d.Val())
				}
				dep.IsDefault = true
			}
			deployments = append(deployments, dep)
			continue
		}
		var val string
		if !d.Args(&val) {
			return d.ArgErr()
		}
		if key == "cloudc_service_account_json" {
			if !json.Valid([]byte(val)) {
				return d.Errf("cloudc_service_account_json must be an inline JSON object")
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
		return d.Errf("virtual key: %v", err)
	}
	s.Deployments = deployments
	if a.VirtualKeys == nil {
		a.VirtualKeys = map[string]*providers.Settings{}
	}
	a.VirtualKeys[name] = s
	return nil
}

// unmarshalConfig reads `config <id> <file path | inline JSON object>`.
func (a *App) unmarshalConfig(d *caddyfile.Dispenser) error {
	var id, val string
	if !d.Args(&id, &val) {
		return d.ArgErr()
	}
	raw, err := jsonarg.Value(val)
	if err != nil {
		return d.Errf("config %q: %v", id, err)
	}
	if a.Configs == nil {
		a.Configs = map[string]json.RawMessage{}
	}
	a.Configs[id] = raw
	return nil
}

// unmarshalGuardrail reads `guardrail <id> <file path | inline JSON
// object>`, a definition saved under id so configs can name it in the
// string form of input_guardrails / output_guardrails.
func (a *App) unmarshalGuardrail(d *caddyfile.Dispenser) error {
	var id, val string
	if !d.Args(&id, &val) || d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(1) {
		return d.Errf("guardrail %q: takes no block; give a file path or an inline JSON object", id)
	}
	if _, dup := a.Guardrails[id]; dup {
		return d.Errf("guardrail %q: defined twice", id)
	}
	raw, err := jsonarg.Value(val)
	if err != nil {
		return d.Errf("guardrail %q: %v", id, err)
	}
	if a.Guardrails == nil {
		a.Guardrails = map[string]json.RawMessage{}
	}
	a.Guardrails[id] = raw
	return nil
}

// unmarshalSemanticCache reads the `semantic_cache { … }` block.
func (a *App) unmarshalSemanticCache(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.SemanticCache != nil {
		return d.Err("semantic_cache: configured twice")
	}
	sc := &SemanticCacheConfig{}
	for d.NextBlock(1) {
		opt := d.Val()
		if opt == "embedding" {
			if !d.Args(&sc.Embedding.VirtualKey, &sc.Embedding.Model) || d.NextArg() {
				return d.ArgErr()
			}
			continue
		}
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "threshold":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return d.Errf("semantic_cache: threshold must be a number in (0, 1], got %q", v)
			}
			sc.Threshold = f
		case "max_memory":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("semantic_cache: max_memory: invalid size %q", v)
			}
			sc.MaxMemory = int64(n)
		case "max_entries":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("semantic_cache: max_entries must be a positive integer, got %q", v)
			}
			sc.MaxEntries = n
		case "embed_timeout":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("semantic_cache: embed_timeout: invalid duration %q", v)
			}
			sc.EmbedTimeout = caddy.Duration(dur)
		default:
			return d.Errf("unknown semantic_cache option %q", opt)
		}
	}
	if sc.Embedding.VirtualKey == "" {
		return d.Err("semantic_cache: embedding <virtual_key> <model> is required")
	}
	a.SemanticCache = sc
	return nil
}

// unmarshalBatches reads the `batches { … }` block.
func (a *App) unmarshalBatches(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	cfg := &BatchesConfig{}
	for d.NextBlock(1) {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "max_file_size":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("batches max_file_size must be a positive size, like 100MiB")
			}
			cfg.MaxFileBytes = int64(n)
		case "max_active", "max_running":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("batches %s must be a positive integer", opt)
			}
			if opt == "max_active" {
				cfg.MaxActive = n
			} else {
				cfg.MaxRunning = n
			}
		case "lease":
			l, err := caddy.ParseDuration(v)
			if err != nil || checkLease(l) != nil || l == 0 {
				return d.Errf("batches lease must be a duration from %v to %v, like 10s", batches.MinLease, batches.MaxLease)
			}
			cfg.Lease = caddy.Duration(l)
		default:
			return d.Errf("unknown batches option %q", opt)
		}
	}
	a.BatchLimits = cfg
	return nil
}

// unmarshalRedis reads `redis [<host:port>] [{ … }]`.
func (a *App) unmarshalRedis(d *caddyfile.Dispenser) error {
	r := &RedisConfig{}
	d.Args(&r.Address)
	if d.NextArg() {
		return d.ArgErr()
	}
	one := func(dst *string) error {
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
	var err error
	for d.NextBlock(1) {
		switch d.Val() {
		case "username":
			err = one(&r.Username)
		case "password":
			err = one(&r.Password)
		case "db":
			var db string
			if err = one(&db); err != nil {
				break
			}
			n, convErr := strconv.Atoi(db)
			if convErr != nil || n < 0 {
				return d.Errf("redis db must be a non-negative integer")
			}
			r.DB = n
		case "cluster":
			r.Cluster = d.RemainingArgs()
			if len(r.Cluster) == 0 {
				return d.ArgErr()
			}
		case "sentinel":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("redis sentinel: want <master name> <sentinel address>...")
			}
			r.MasterName, r.Sentinels = args[0], args[1:]
		case "sentinel_username":
			err = one(&r.SentinelUsername)
		case "sentinel_password":
			err = one(&r.SentinelPassword)
		case "key_prefix":
			err = one(&r.KeyPrefix)
		case "tls":
			r.TLS, err = unmarshalRedisTLS(d)
		case "fail_open":
			r.FailOpen = true
		case "fail_closed":
			r.FailOpen = false
		default:
			return d.Errf("unknown redis option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	if _, err := r.redisOptions(); err != nil && !strings.Contains(err.Error(), "redis tls:") {
		// Certificate files are read at provision, where they may exist
		// only on the serving host; the shape is checked here.
		return d.Err(err.Error())
	}
	a.Redis = r
	return nil
}

// unmarshalRedisTLS reads `tls [{ ca <file> cert <file> key <file>
// server_name <name> }]`.
func unmarshalRedisTLS(d *caddyfile.Dispenser) (*RedisTLS, error) {
	t := &RedisTLS{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(2) {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return nil, d.ArgErr()
		}
		switch opt {
		case "ca":
			t.CA = v
		case "cert":
			t.Cert = v
		case "key":
			t.Key = v
		case "server_name":
			t.ServerName = v
		default:
			return nil, d.Errf("unknown redis tls option %q", opt)
		}
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, d.Err("redis tls: cert and key go together")
	}
	return t, nil
}

// Interface guards.
var _ caddyfile.Unmarshaler = (*App)(nil)
