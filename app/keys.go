package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// KeysConfig configures the keys, virtual keys and configs managed through
// the control-plane API (docs/keys.md).
type KeysConfig struct {
	// Secret is the server secret gateway keys are hashed under (HMAC-
	// SHA256), at least 32 bytes, best given as {env.VAR} or {file.path}.
	// Without it a random secret is created once and kept in the record
	// store, shared by the instances that share the store.
	Secret string `json:"secret,omitempty"`
	// EncryptionKey seals provider credentials of virtual keys created
	// through the API (AES-256-GCM): 32 bytes as 64 hex digits or base64,
	// given as {env.VAR} or {file.path}. Without it such virtual keys are
	// refused.
	EncryptionKey string `json:"encryption_key,omitempty"`
	// PreviousEncryptionKeys still open credentials sealed before the
	// encryption key was rotated; every write seals with EncryptionKey.
	PreviousEncryptionKeys []string `json:"previous_encryption_keys,omitempty"`
}

// keysState adds "keys" and the managed record store.
type keysState struct {
	// Keys configures the managed records. The API serves them whether or
	// not it is set.
	Keys *KeysConfig `json:"keys,omitempty"`

	keyStore *keys.Store

	// recordsState adds "records": where these and the other
	// control-plane records live (records.go).
	recordsState
}

// keyStores holds one record store per backend and secrets for the whole
// process, so a reload keeps the in-memory index (which may hold millions
// of keys) and its change feed instead of reading everything again.
var keyStores = caddy.NewUsagePool()

type pooledStore struct{ *keys.Store }

func (p pooledStore) Destruct() error { p.Stop(); return nil }

// provisionKeys opens the record store. It runs after provisionShared.
func (a *App) provisionKeys(ctx caddy.Context) error {
	cfg := a.Keys
	if cfg == nil {
		cfg = new(KeysConfig)
	}
	for _, f := range []struct{ name, v string }{{"secret", cfg.Secret}, {"encryption_key", cfg.EncryptionKey}} {
		if literalSecret(f.v) {
			a.logger.Warn("keys: a literal secret is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR} or {file.path}",
				zap.String("field", f.name))
		}
	}
	repl := caddy.NewReplacer()
	opts := keys.Options{Logger: a.logger.Named("keys")}
	backend := ""
	// With Redis, changes are announced through it (and the change
	// counter is there) wherever the records live; the key prefix names
	// the records too, so an import copies them as they are.
	if a.redis != nil {
		opts.Redis, backend = a.redis, "redis|"+a.redisKey+"|"+a.RedisKeyPrefix()
		if p := a.RedisKeyPrefix(); p != "" {
			opts.Prefix = p + "llm_gateway/keys"
		}
	}
	switch {
	case a.recordsRedis:
		opts.KV = kvstore.NewRedis(a.redis, 0)
	case a.recordsSQL != nil:
		opts.KV, backend = a.recordsSQL, backend+"|sql|"+a.recordsKey
	default:
		opts.KV, backend = a.storage, backend+fmt.Sprintf("|storage|%T|%+v", a.storage, a.storage)
	}
	secret := []byte(repl.ReplaceAll(cfg.Secret, ""))
	if cfg.Secret != "" && len(secret) < 32 {
		return fmt.Errorf("keys: secret must be at least 32 bytes (is its placeholder set?)")
	}
	if len(secret) == 0 {
		// Read from the store when it is first initialised: with Redis
		// down the gateway still starts (Caddyfile keys work) and the
		// store retries.
		kvOpts := opts
		if !a.recordsRedis {
			// The secret is kept with the records: a Redis flush
			// must not change it (every key would stop working).
			kvOpts.Redis = nil
		}
		opts.Secret = func(ctx context.Context) ([]byte, error) { return keys.LoadOrCreateSecret(ctx, kvOpts) }
	} else {
		h, err := keys.NewHasher(secret)
		if err != nil {
			return err
		}
		opts.Hasher = h
	}
	fingerprint := sha256.New()
	fingerprint.Write([]byte(backend))
	fingerprint.Write(secret)
	encKey := repl.ReplaceAll(cfg.EncryptionKey, "")
	if cfg.EncryptionKey != "" && encKey == "" {
		// Like a virtual key's unset api_key: the gateway starts, and
		// creating a virtual key through the API says what is missing.
		a.logger.Warn("keys: encryption_key is empty (is its environment variable set?): virtual keys cannot be created through the API until it is set")
	}
	if encKey != "" {
		var raw [][]byte
		for i, v := range append([]string{cfg.EncryptionKey}, cfg.PreviousEncryptionKeys...) {
			k, err := keys.ParseEncryptionKey(repl.ReplaceAll(v, ""))
			if err != nil {
				if i == 0 {
					return fmt.Errorf("keys: encryption_key: %v (is its placeholder set?)", err)
				}
				return fmt.Errorf("keys: previous_encryption_keys[%d]: %v", i-1, err)
			}
			raw = append(raw, k)
			fingerprint.Write(k)
		}
		sealer, err := keys.NewSealer(raw...)
		if err != nil {
			return err
		}
		opts.Sealer = sealer
	}
	poolKey := hex.EncodeToString(fingerprint.Sum(nil))
	v, _, err := keyStores.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
		s, err := keys.New(opts)
		if err != nil {
			return nil, err
		}
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Init(c); err != nil {
			a.logger.Warn("keys: the record store is unavailable; API keys are refused until it answers (Caddyfile keys work)", zap.Error(err))
		}
		s.Start()
		return pooledStore{s}, nil
	})
	if err != nil {
		return fmt.Errorf("keys: opening the record store: %v", err)
	}
	a.keyStore = v.(pooledStore).Store
	// The store outlives this config only while a newer one uses it.
	go func() {
		<-ctx.Done()
		_, _ = keyStores.Delete(poolKey)
	}()
	return nil
}

// KeyStore returns the managed record store.
func (a *App) KeyStore() *keys.Store { return a.keyStore }

// configKeyID is the id a Caddyfile key is listed under.
func configKeyID(name string) string {
	return uuid.NewSHA1(idNamespace, []byte("api_key:"+name)).String()
}

// ConfigKeys returns the identities of the Caddyfile's gateway keys.
func (a *App) ConfigKeys() []*identity.Caller {
	out := make([]*identity.Caller, len(a.keys))
	for i := range a.keys {
		out[i] = a.keys[i].id
	}
	return out
}

// ConfigVirtualKey returns the Caddyfile's virtual key name, resolved
// (it holds credentials: never write them anywhere).
func (a *App) ConfigVirtualKey(name string) (*providers.Settings, bool) {
	s, ok := a.virtualKeys[name]
	return s, ok
}

// ConfigVirtualKeyNames returns the Caddyfile's virtual key names.
func (a *App) ConfigVirtualKeyNames() []string {
	out := make([]string, 0, len(a.virtualKeys))
	for n := range a.virtualKeys {
		out = append(out, n)
	}
	return out
}

// ConfigConfigs returns the Caddyfile's saved configs by id.
func (a *App) ConfigConfigs() map[string][]byte { return a.configs }

// authErrors are the 401s of keys the store knows but refuses.
var authErrors = map[keys.Result]struct{ code, msg string }{
	keys.Expired:    {"api_key_expired", "the gateway API key has expired"},
	keys.Revoked:    {"api_key_revoked", "the gateway API key has been revoked"},
	keys.Disabled:   {"api_key_disabled", "the gateway API key is disabled"},
	keys.Exhausted:  {"api_key_exhausted", "the gateway API key has used up its usage limit"},
	keys.RotatedOut: {"api_key_rotated", "the gateway API key was rotated and its transition period has ended"},
}

// AuthError is the 401 for a presented key Authenticate refused: a
// missing key, an unknown one, or one the store knows but refuses
// (expired, revoked, disabled, rotated out), each with its own code.
func (a *App) AuthError(presented string) *apierror.Error {
	if presented == "" {
		return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication,
			"missing gateway API key: send it in the "+ingress.Prefix+ingress.APIKey+" header, or as the client's API key (Authorization: Bearer or x-api-key)").WithCode("invalid_api_key")
	}
	if e := a.tokenError(presented); e != nil {
		return e
	}
	if a.keyStore != nil {
		if _, _, res := a.keyStore.Lookup(presented); res != keys.Valid {
			if e, ok := authErrors[res]; ok {
				return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, e.msg).WithCode(e.code)
			}
		}
	}
	return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "invalid gateway API key").WithCode("invalid_api_key")
}

// authenticateStored returns the identity of an API-issued key.
func (a *App) authenticateStored(presented string) (*identity.Caller, bool) {
	if a.keyStore == nil {
		return nil, false
	}
	c, _, res := a.keyStore.Lookup(presented)
	return c, res == keys.Valid
}

// For returns the records resolver of a caller: the Caddyfile's virtual
// keys and configs first (they win over API records of the same name),
// then those of the caller's workspace created through the API. Another
// workspace's records are never found.
func (a *App) For(id *identity.Caller) routing.Resolver {
	if a.keyStore == nil || id == nil {
		return a
	}
	return scopedResolver{a: a, org: id.OrganisationID, ws: id.WorkspaceID}
}

// scopedResolver finds a workspace's API records, and only those of its
// organisation: a record another organisation put in a workspace of the
// same id (before the API refused that) is not found.
type scopedResolver struct {
	a       *App
	org, ws string
}

func (s scopedResolver) VirtualKey(name string) (*providers.Settings, bool) {
	if v, ok := s.a.virtualKeys[name]; ok {
		return v, true
	}
	if r, ok := s.a.keyStore.VirtualKeyRecord(s.ws, name); !ok || r.OrganisationID != s.org {
		return nil, false
	}
	return s.a.keyStore.VirtualKey(s.ws, name)
}

// OperatorVirtualKey implements routing.Origins: the Caddyfile's virtual
// keys are the operator's, those saved through the API are not.
func (s scopedResolver) OperatorVirtualKey(name string) bool {
	_, ok := s.a.virtualKeys[name]
	return ok
}

// OperatorConfig implements routing.Origins for saved configs.
func (s scopedResolver) OperatorConfig(id string) bool {
	_, ok := s.a.configs[id]
	return ok
}

func (s scopedResolver) SavedConfig(id string) ([]byte, bool) {
	if c, ok := s.a.configs[id]; ok {
		return c, true
	}
	c, ok := s.a.keyStore.Config(s.ws, id)
	if !ok || c.OrganisationID != s.org {
		return nil, false
	}
	return c.Latest().Config, true
}

// CheckConfig validates a config saved through the API for workspace ws
// of organisation org as a Caddyfile config is checked at load (schema,
// plan, hooks), with the workspace's own virtual keys. It is read
// strictly first (member names unescaped, none given twice). A config
// saved through the API is client input but is routed as a saved
// (trusted) config, so it may not set custom_host anywhere: an address is
// the operator's to give.
func (a *App) CheckConfig(body []byte, org, ws string) error {
	if err := keys.CheckConfigJSON(body); err != nil {
		var je *keys.JSONError
		if errors.As(err, &je) && je.Name == "custom_host" {
			return fmt.Errorf("%s: a config saved through the API may not set custom_host; declare such a target in the Caddyfile", je.Member)
		}
		return err
	}
	cfg, err := routing.NewConfigCache(1).Parse(string(body))
	if err != nil {
		return plainError(err)
	}
	if _, err := routing.ResolveConfig(cfg, &ingress.Headers{Provider: "openai"}, scopedResolver{a: a, org: org, ws: ws}); err != nil {
		return plainError(err)
	}
	return a.checkConfigHooks(body)
}

// CheckVirtualKey validates provider settings given through the API.
func CheckVirtualKey(s *providers.Settings) error {
	if s.Provider == "" {
		return fmt.Errorf("provider is required")
	}
	s.Provider = strings.ToLower(s.Provider)
	if _, ok := providers.Lookup(s.Provider); !ok {
		return fmt.Errorf("unknown provider %q", s.Provider)
	}
	if s.CustomHost != "" {
		return fmt.Errorf("custom_host: a virtual key created through the API may not set custom_host; declare it in the Caddyfile")
	}
	return checkCredentials(s)
}

// KeysLogger is the logger of the keys API.
func (a *App) KeysLogger() *zap.Logger { return a.logger.Named("keys") }
