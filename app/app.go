// Package app is the gateway's control plane: the `llm` Caddy app that
// holds gateway API keys, virtual keys and saved configs, shared by every
// route of one Caddy. Handlers find it with ctx.App("llm").
package app

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// ID is the app's module ID and its global Caddyfile option name.
const ID = "llm"

// App is the `llm` app. Secrets in it should be given as {env.*}
// placeholders (or sha256: digests for gateway keys): they are resolved at
// provision time into unexported fields, so GET /config/ only ever shows
// the placeholder.
type App struct {
	// APIKeys are the gateway API keys clients send in x-gateway-api-key.
	APIKeys []APIKey `json:"api_keys,omitempty"`
	// VirtualKeys map a name to stored provider credentials and settings.
	VirtualKeys map[string]*providers.Settings `json:"virtual_keys,omitempty"`
	// Configs map a saved config id to a configuration object, given inline
	// as a JSON object or as a JSON string holding a file path.
	Configs map[string]json.RawMessage `json:"configs,omitempty"`
	// Models map public model names to routing configurations (models.go).
	Models map[string]*ModelAlias `json:"models,omitempty"`
	// Redis, when set, holds state shared by all gateway instances.
	Redis *RedisConfig `json:"redis,omitempty"`
	// Prompts configures the prompt library (prompt files, API prompts).
	Prompts *PromptsConfig `json:"prompts,omitempty"`
	// guardrailStore adds "guardrails", the saved guardrails (guardrails.go).
	guardrailStore
	// cacheSettings adds "semantic_cache" (semcache.go).
	cacheSettings
	// responsesState adds "responses_retention" and the response store
	// (responses.go).
	responsesState
	// batchState adds the file store and batch engine (batches.go).
	batchState
	// costCatalog adds "price_catalog" (cost.go).
	costCatalog
	// heldState adds "max_held_bytes" (held.go).
	heldState
	// ledgerState adds "ledger", the usage ledger (ledger.go).
	ledgerState
	// budgetState adds "budgets" and the usage limits (budgets.go).
	budgetState
	// budgetMetrics exports where the usage limits stand
	// (budgetmetrics.go).
	budgetMetrics
	// keysState adds "keys" and the managed record store (keys.go).
	keysState
	// mcpState adds "mcp_servers", the MCP servers llm_mcp relays (mcp.go).
	mcpState
	// oidcState adds "oidc", callers by IdP tokens (oidc.go).
	oidcState
	// controlPlaneState adds "api", the management API modules and their
	// router (controlplane.go).
	controlPlaneState
	// admissions holds the llm_ratelimit stages managed batch lines pass
	// (admission.go).
	admissions *admissions
	// issuer vouches for the state this config's handlers hand each
	// other about a request's caller (authctx.go).
	issuer handoff.Issuer

	keys        []resolvedKey
	virtualKeys map[string]*providers.Settings
	configs     map[string][]byte
	// aliases maps a model alias to the saved config id it routes by.
	aliases  map[string]string
	logger   *zap.Logger
	storage  certmagic.Storage
	redis    redis.UniversalClient
	redisKey string
	// probe is CheckStore's memory of whether Redis answers.
	probe       *storeProbe
	policyStore policies.CachedStore
	limiter     policies.Limiter
	limiterKey  string
}

// APIKey is one gateway API key.
type APIKey struct {
	// Name identifies the key in logs, metrics and rate-limit policies.
	Name string `json:"name"`
	// Key is "{env.VAR}", "sha256:<hex digest of the key>", or the key.
	Key string `json:"key"`
	// WorkspaceID and OrganisationID default to UUIDs derived from Name,
	// so they stay stable across restarts without being configured.
	WorkspaceID    string `json:"workspace_id,omitempty"`
	OrganisationID string `json:"organisation_id,omitempty"`
	// Type is "workspace" (the default: the key manages its own
	// workspace's records) or "organisation" (every workspace of its
	// organisation).
	Type string `json:"type,omitempty"`
	// Scopes are what the key may do through the management APIs; without
	// any, the key holds every scope in its own workspace (see docs/keys.md).
	Scopes []string `json:"scopes,omitempty"`
}

type resolvedKey struct {
	digest [sha256.Size]byte
	id     *identity.Caller
}

var idNamespace = uuid.MustParse("6b0c8a52-0d1e-4b44-9f0e-6c1f3b0c9a11")

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: ID, New: func() caddy.Module { return new(App) }}
}

// Provision resolves placeholders and validates saved configs, so a bad
// config fails the load instead of the first request that uses it.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.admissions = new(admissions)
	if err := a.provisionShared(ctx); err != nil {
		return err
	}
	a.provisionResponses()
	if err := a.provisionHeld(); err != nil {
		return err
	}
	if err := a.provisionBatches(); err != nil {
		return err
	}
	if err := a.provisionLedger(ctx); err != nil {
		return err
	}
	if err := a.provisionBudgets(ctx); err != nil {
		return err
	}
	if err := a.provisionBudgetMetrics(ctx); err != nil {
		return err
	}
	if err := observe.RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %v", err)
	}
	repl := caddy.NewReplacer()
	seen := make(map[string]bool, len(a.APIKeys))
	for i, k := range a.APIKeys {
		if k.Name == "" {
			return fmt.Errorf("api_keys[%d]: name is required", i)
		}
		if seen[k.Name] {
			return fmt.Errorf("api_keys[%d]: duplicate name %q", i, k.Name)
		}
		seen[k.Name] = true
		if literalSecret(k.Key) && !strings.HasPrefix(k.Key, "sha256:") {
			a.logger.Warn("gateway API key is a literal value: it is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR} or sha256:<hex>",
				zap.String("api_key", k.Name))
		}
		digest, err := keyDigest(repl, k.Key)
		if err != nil {
			return fmt.Errorf("api key %q: %v", k.Name, err)
		}
		id := &identity.Caller{Name: k.Name, WorkspaceID: k.WorkspaceID, OrganisationID: k.OrganisationID,
			KeyID: configKeyID(k.Name), Source: keys.SourceConfig, Type: k.Type, Scopes: k.Scopes}
		switch id.Type {
		case "":
			id.Type = keys.TypeWorkspace
		case keys.TypeWorkspace, keys.TypeOrganisation:
		default:
			return fmt.Errorf("api key %q: type must be workspace or organisation", k.Name)
		}
		for _, sc := range k.Scopes {
			if !keys.ValidScope(sc) {
				return fmt.Errorf("api key %q: unknown scope %q", k.Name, sc)
			}
		}
		if id.WorkspaceID == "" {
			id.WorkspaceID = uuid.NewSHA1(idNamespace, []byte("workspace:"+k.Name)).String()
		} else if _, err := uuid.Parse(id.WorkspaceID); err != nil {
			return fmt.Errorf("api key %q: workspace_id must be a UUID", k.Name)
		}
		if id.OrganisationID == "" {
			id.OrganisationID = uuid.NewSHA1(idNamespace, []byte("organisation:"+k.Name)).String()
		} else if _, err := uuid.Parse(id.OrganisationID); err != nil {
			return fmt.Errorf("api key %q: organisation_id must be a UUID", k.Name)
		}
		a.keys = append(a.keys, resolvedKey{digest: digest, id: id})
	}
	if err := a.provisionMCP(repl); err != nil {
		return err
	}
	if err := a.provisionCost(); err != nil {
		return err
	}

	// Models named in the configuration keep their own metric label.
	var models []string
	a.virtualKeys = make(map[string]*providers.Settings, len(a.VirtualKeys))
	for name, vk := range a.VirtualKeys {
		if vk == nil || vk.Provider == "" {
			return fmt.Errorf("virtual key %q: provider is required", name)
		}
		if _, ok := providers.Lookup(strings.ToLower(vk.Provider)); !ok {
			return fmt.Errorf("virtual key %q: unknown provider %q", name, vk.Provider)
		}
		if fields := literalCredentials(vk); len(fields) > 0 {
			a.logger.Warn("virtual key holds a literal credential: it is visible in GET /config/ of the admin API and in autosave.json; give it as an {env.VAR} placeholder",
				zap.String("virtual_key", name), zap.Strings("fields", fields))
		}
		resolved := *vk
		resolved.Provider = strings.ToLower(resolved.Provider)
		unset, err := replaceStrings(repl, &resolved)
		if err != nil {
			return fmt.Errorf("virtual key %q: %v", name, err)
		}
		for _, u := range unset {
			a.logger.Warn("virtual key credential is empty: requests through this virtual key fail with 401 missing_provider_key until it is set and the config reloaded",
				zap.String("virtual_key", name), zap.String("field", u.field), zap.String("placeholder", u.placeholder))
		}
		if err := checkCredentials(&resolved); err != nil {
			return fmt.Errorf("virtual key %q: %v", name, err)
		}
		a.virtualKeys[name] = &resolved
		for _, d := range resolved.Deployments {
			models = append(models, d.Alias)
		}
	}

	if err := a.provisionCaches(); err != nil {
		return err
	}
	if err := a.provisionGuardrails(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	a.configs = make(map[string][]byte, len(a.Configs))
	for id, raw := range a.Configs {
		body, err := loadConfig(raw)
		if err != nil {
			return fmt.Errorf("config %q: %v", id, err)
		}
		if err := a.checkSavedConfig(body); err != nil {
			return fmt.Errorf("config %q: %v", id, err)
		}
		if err := a.checkConfigHooks(body); err != nil {
			return fmt.Errorf("config %q: %v", id, err)
		}
		a.configs[id] = body
		models = append(models, observe.ModelsInConfig(body)...)
	}
	// The price catalog's names keep their metric label too; every other
	// model a client names is "_other".
	observe.SetConfiguredModels(append(models, a.Prices().Models()...))
	if err := a.provisionKeys(ctx); err != nil {
		return err
	}
	if err := a.provisionModels(); err != nil {
		return err
	}
	if err := a.provisionOIDC(); err != nil {
		return err
	}
	if err := a.provisionPrompts(ctx); err != nil {
		return err
	}
	return a.provisionControlPlane(ctx)
}

// Start implements caddy.App.
func (a *App) Start() error {
	a.startResponseSweep()
	a.startBatches()
	a.startHookPool()
	return nil
}

// Stop implements caddy.App.
func (a *App) Stop() error { a.stopResponseSweep(); a.stopHookPool(); return nil }

// Authenticate returns the identity of a presented gateway key. Every
// configured key is compared, in constant time, whatever matches, so the
// time taken does not tell which key was close; a key the Caddyfile does
// not hold is then looked up among the API's (keys.Store.Lookup: one HMAC
// and one map read), or, shaped as a JWT with "oidc" set, validated as
// the identity provider's token (jwtauth: from its cache when seen
// within cache_ttl). AuthError says why a key was refused.
func (a *App) Authenticate(presented string) (*identity.Caller, bool) {
	if presented == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(presented))
	var found *identity.Caller
	for i := range a.keys {
		if subtle.ConstantTimeCompare(d[:], a.keys[i].digest[:]) == 1 {
			found = a.keys[i].id
		}
	}
	if found == nil {
		if a.tokens != nil && jwtauth.LooksLikeJWT(presented) {
			return a.authenticateToken(presented)
		}
		return a.authenticateStored(presented)
	}
	return found, true
}

// SavedConfig implements routing.Resolver.
func (a *App) SavedConfig(id string) ([]byte, bool) {
	b, ok := a.configs[id]
	return b, ok
}

// VirtualKey implements routing.Resolver.
func (a *App) VirtualKey(name string) (*providers.Settings, bool) {
	s, ok := a.virtualKeys[name]
	return s, ok
}

// OperatorVirtualKey implements routing.Origins: without a key store
// every record is the Caddyfile's.
func (a *App) OperatorVirtualKey(name string) bool {
	_, ok := a.virtualKeys[name]
	return ok
}

// OperatorConfig implements routing.Origins.
func (a *App) OperatorConfig(id string) bool {
	_, ok := a.configs[id]
	return ok
}

func keyDigest(repl *caddy.Replacer, key string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	if hexDigest, ok := strings.CutPrefix(key, "sha256:"); ok {
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != sha256.Size {
			return d, fmt.Errorf("sha256: value must be 64 hex digits")
		}
		copy(d[:], b)
		return d, nil
	}
	resolved := repl.ReplaceAll(key, "")
	if resolved == "" {
		return d, fmt.Errorf("key is empty (is its environment variable set?)")
	}
	return sha256.Sum256([]byte(resolved)), nil
}

// unsetField is a virtual key's api_key whose placeholder resolved to
// nothing: named for the load's warning, never with a value.
type unsetField struct{ field, placeholder string }

// replaceStrings resolves placeholders in every string field of s. A
// placeholder that resolves to nothing (an unset {env.VAR}) fails the
// load, naming the field and the placeholder, never a value, except in
// api_key: a virtual key without its key still starts (the gateway is
// usable with its other keys and local models, as the example's newcomer
// and the benchmark harness run it) and every request through it is a
// clear 401 missing_provider_key. Those are returned for a warning. An
// address or cloud field never resolves to empty silently: it would send
// requests somewhere else.
func replaceStrings(repl *caddy.Replacer, s *providers.Settings) ([]unsetField, error) {
	var unset []unsetField
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.String || !strings.Contains(f.String(), "{") {
			continue
		}
		name := jsonName(t.Field(i))
		for _, ph := range placeholders(f.String()) {
			if repl.ReplaceAll(ph, "") != "" {
				continue
			}
			if name != "api_key" {
				return nil, fmt.Errorf("%s: %s is empty (is %s set?)", name, ph, placeholderSubject(ph))
			}
			unset = append(unset, unsetField{name, ph})
		}
		f.SetString(repl.ReplaceAll(f.String(), ""))
	}
	return unset, nil
}

// placeholders returns the {…} placeholders in s.
func placeholders(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return out
		}
		out = append(out, s[i:i+j+1])
		s = s[i+j+1:]
	}
}

// placeholderSubject names what an empty placeholder depends on.
func placeholderSubject(ph string) string {
	if v, ok := strings.CutPrefix(strings.Trim(ph, "{}"), "env."); ok {
		return "environment variable " + v
	}
	return "its value"
}

func jsonName(f reflect.StructField) string {
	if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" && n != "-" {
		return n
	}
	return f.Name
}

// checkCredentials refuses a virtual key whose credentials are half given:
// an access key id without its secret (or the reverse) would fail every
// request at the provider.
func checkCredentials(s *providers.Settings) error {
	if (s.CloudAAccessKeyID == "") != (s.CloudASecretAccessKey == "") {
		return fmt.Errorf("clouda_access_key_id and clouda_secret_access_key must be given together")
	}
	if s.CloudASessionToken != "" && s.CloudAAccessKeyID == "" {
		return fmt.Errorf("clouda_session_token needs clouda_access_key_id and clouda_secret_access_key")
	}
	return nil
}

// literalCredentials names the credential fields of a virtual key given as
// literal values rather than placeholders. The JSON config is what the
// admin API serves (GET /config/) and Caddy autosaves, so a literal there
// leaks; a placeholder is resolved only into the provisioned copy. Caddy's
// {$VAR} Caddyfile syntax is substituted when the file is adapted, so it
// also arrives here as a literal, which is why this warns rather than
// trusting the Caddyfile's look.
func literalCredentials(s *providers.Settings) []string {
	var out []string
	for _, f := range []struct{ name, v string }{
		{"api_key", s.APIKey},
		{"clouda_secret_access_key", s.CloudASecretAccessKey},
		{"clouda_session_token", s.CloudASessionToken},
	} {
		if literalSecret(f.v) {
			out = append(out, f.name)
		}
	}
	// A service account is an inline JSON object: it cannot be a
	// placeholder, so it is always literal when given.
	if len(s.CloudCServiceAccountJSON) > 0 {
		out = append(out, "cloudc_service_account_json")
	}
	return out
}

// literalSecret reports whether a credential value is given literally:
// non-empty and holding no placeholder.
func literalSecret(v string) bool {
	return v != "" && len(placeholders(v)) == 0
}

// checkSavedConfig validates a saved config as fully as the gateway can
// without a request: the schema, then the plan a request naming it would
// get (conditional queries and target names, load-balance weights, each
// leaf's virtual key and provider). A leaf without a provider is left to
// the client's x-gateway-provider header, which a saved config may rely on:
// it is checked as if the client named a known provider. Prompt ids are
// not resolved here: API prompts are created at run time.
func (a *App) checkSavedConfig(body []byte) error {
	cfg, err := routing.NewConfigCache(1).Parse(string(body))
	if err != nil {
		return plainError(err)
	}
	if _, err := routing.ResolveConfig(cfg, &ingress.Headers{Provider: "openai"}, a); err != nil {
		return plainError(err)
	}
	return nil
}

// plainError drops the HTTP status and type of a client-facing error, so
// a load failure reads as the rule that failed.
func plainError(err error) error {
	var e *apierror.Error
	if errors.As(err, &e) {
		if p, ok := e.Param.(string); ok && p != "" && !strings.Contains(e.Message, p) {
			return fmt.Errorf("%s: %s", p, e.Message)
		}
		return errors.New(e.Message)
	}
	return err
}

// loadConfig accepts an inline JSON object or a JSON string naming a file.
func loadConfig(raw json.RawMessage) ([]byte, error) {
	var path string
	if err := json.Unmarshal(raw, &path); err == nil {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", path, err)
		}
		return b, nil
	}
	return raw, nil
}

// Interface guards.
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
	_ routing.Resolver  = (*App)(nil)
)
