// Package keysapi serves the management API of gateway keys, virtual keys
// and saved configs (/v1/api-keys, /v1/virtual-keys, /v1/configs) and the
// audit log of their changes (/v1/audit-logs) through the gateway's
// control plane, in the shapes the portkey-ai SDK sends and reads.
// It is the llm.api.keys module; the records live in package keys.
//
// Every route asks one rule, keys.Authorize (keys/authz.go), whether the
// caller may do its action to its target: the scope (api_keys.create,
// configs.read, …), the organisation (another organisation's records are
// never reached), the reach (a workspace key its own workspace's records,
// an organisation key every workspace of its organisation), the source
// (records declared in the Caddyfile are listed with source "config" and
// are read-only, 409) and, for gateway keys, the grant (no key writes,
// rotates or mints a key beyond its own scopes, reach, models or usage
// limit). A record out of reach is a 404, as if it did not exist; a named
// workspace out of reach a 403 workspace_forbidden.
package keysapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

func init() { caddy.RegisterModule(Module{}) }

// Module is the llm.api.keys module: the gateway keys, virtual keys,
// configs and audit log APIs.
type Module struct {
	app Gateway
}

// Gateway is what the keys API uses of the gateway it serves (the llm
// app satisfies it), declared here so the module depends on these
// methods and not on the app's: the key store the routes write, the
// records the Caddyfile declares (read-only here), the resolver a key's
// defaults are checked against, and the tenancy rule's question.
type Gateway interface {
	// KeyStore is the API's record store (nil without one).
	KeyStore() *keys.Store
	// ConfigKeys are the Caddyfile's gateway keys.
	ConfigKeys() []*identity.Caller
	// ConfigVirtualKey is the Caddyfile's virtual key name.
	ConfigVirtualKey(name string) (*providers.Settings, bool)
	// ConfigVirtualKeyNames are the Caddyfile's virtual keys, sorted.
	ConfigVirtualKeyNames() []string
	// ConfigConfigs are the Caddyfile's saved configs by id.
	ConfigConfigs() map[string][]byte
	// For is the resolver of saved configs and virtual keys caller
	// routes with.
	For(caller *identity.Caller) routing.Resolver
	// CheckConfig validates a config body as workspace ws of org routes it.
	CheckConfig(body []byte, org, ws string) error
	// CheckVirtualKey validates provider settings given through the API.
	CheckVirtualKey(s *providers.Settings) error
	// ForeignOrganisation is controlplane.Workspaces' question.
	ForeignOrganisation(ws, own string) (string, bool)
	// OperatorModelAlias reports whether the Caddyfile declares alias
	// (a model alias the configs API may not take).
	OperatorModelAlias(alias string) bool
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".keys", New: func() caddy.Module { return new(Module) }}
}

// appID is the llm app's module ID, whose Gateway the routes serve.
const appID = "llm"

// Provision takes the llm app, as the Gateway the routes serve.
func (m *Module) Provision(ctx caddy.Context) error {
	v, err := ctx.App(appID)
	if err != nil {
		return err
	}
	g, ok := v.(Gateway)
	if !ok {
		return fmt.Errorf("app %s is %T, which does not serve the keys API", appID, v)
	}
	m.app = g
	return nil
}

// Routes implements controlplane.Module. The scope of each is the rule's
// (keys.Authorize), which sees the record too; the router's check is none.
func (m *Module) Routes() []controlplane.Route {
	routes := []struct {
		method, path string
		fn           func(*call) (any, error)
	}{
		{"POST", "/v1/api-keys/{type}/{subtype}", createAPIKey},
		{"GET", "/v1/api-keys", listAPIKeys},
		{"GET", "/v1/api-keys/{id}", getAPIKey},
		{"PUT", "/v1/api-keys/{id}", updateAPIKey},
		{"DELETE", "/v1/api-keys/{id}", deleteAPIKey},
		{"POST", "/v1/api-keys/{id}/rotate", rotateAPIKey},
		{"POST", "/v1/virtual-keys", createVirtualKey},
		{"GET", "/v1/virtual-keys", listVirtualKeys},
		{"GET", "/v1/virtual-keys/{slug}", getVirtualKey},
		{"PUT", "/v1/virtual-keys/{slug}", updateVirtualKey},
		{"DELETE", "/v1/virtual-keys/{slug}", deleteVirtualKey},
		{"POST", "/v1/virtual-keys/{slug}/rotate", rotateVirtualKey},
		{"POST", "/v1/configs", createConfig},
		{"GET", "/v1/configs", listConfigs},
		{"GET", "/v1/configs/{slug}", getConfig},
		{"PUT", "/v1/configs/{slug}", updateConfig},
		{"DELETE", "/v1/configs/{slug}", deleteConfig},
		{"GET", "/v1/configs/{slug}/versions", listConfigVersions},
		{"GET", "/v1/audit-logs", listAuditLogs},
	}
	out := make([]controlplane.Route, len(routes))
	for i, r := range routes {
		out[i] = controlplane.Route{Method: r.method, Path: r.path, Handler: m.handle(r.fn)}
	}
	return out
}

// MapError implements controlplane.ErrorMapper: the store's refusals of a
// write; any other store error is the router's 503.
func (*Module) MapError(err error) *apierror.Error { return writeRefused(err) }

// call is one API request.
type call struct {
	*controlplane.Call
	r     *http.Request
	id    *identity.Caller
	app   Gateway
	store *keys.Store
	body  []byte
	who   *keys.Actor // the caller as the rule sees it (actor)
}

func (m *Module) handle(fn func(*call) (any, error)) controlplane.Handler {
	return func(cp *controlplane.Call) (any, error) {
		store := m.app.KeyStore()
		if store == nil || !store.Ready() {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the key store is unavailable; try again")
		}
		return fn(&call{Call: cp, r: cp.Request, id: cp.Caller, app: m.app, store: store, body: cp.Body})
	}
}

// audit records a change (the control plane's one audit writer).
func (c *call) audit(action, typ, id, ws, org string, fields []string) {
	c.Audit(action, typ, id, ws, org, fields)
}

func notFound(what, ref string) error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "%s %s not found", what, apierror.QuoteID(ref))
}

func readOnly(what, name string) error {
	return apierror.Newf(http.StatusConflict, apierror.TypeInvalidRequest,
		"%s %s is declared in the Caddyfile (the llm app's configuration) and is read-only here: change it there and reload", what, apierror.QuoteID(name)).WithCode("declared_in_caddyfile")
}

// tag sets the answer's ETag: record id at version v.
func (c *call) tag(id string, v int64) { c.SetHeader("ETag", controlplane.ETag(id, v)) }

// pre is the call's If-Match as the store's precondition on record id,
// checked on the stored version inside the write (nil without If-Match:
// the write is still a compare-and-set on what it read).
func (c *call) pre(id string) []keys.Precondition {
	if len(c.r.Header.Values("If-Match")) == 0 {
		return nil
	}
	return []keys.Precondition{func(v int64) bool {
		_, ok := c.IfMatch(controlplane.ETag(id, v))
		return ok
	}}
}

// writeError is a write's store error as the API answers it: with
// If-Match, a record changed after the check (a lost swap) is a 412 too,
// since it is no longer the version named.
func (c *call) writeError(err error, what, ref string) error {
	if errors.Is(err, keys.ErrVersionConflict) && len(c.r.Header.Values("If-Match")) > 0 {
		return controlplane.PreconditionFailed()
	}
	return storeError(err, what, ref)
}

func storeError(err error, what, ref string) error {
	switch {
	case errors.Is(err, keys.ErrNotFound):
		return notFound(what, ref)
	case errors.Is(err, keys.ErrConflict):
		return apierror.Newf(http.StatusConflict, apierror.TypeInvalidRequest, "%s slug %s is taken in this workspace", what, apierror.QuoteID(ref)).WithCode("slug_taken")
	case errors.Is(err, keys.ErrNoSealer):
		return noSealer()
	}
	return err
}

// writeRefused is the answer to the store's refusal of a write, nil for
// any other error: records are written over the version they were read
// at, so one changed meanwhile (on any instance) refuses the write, which
// stores nothing.
func writeRefused(err error) *apierror.Error {
	switch {
	case errors.Is(err, keys.ErrPrecondition):
		return controlplane.PreconditionFailed()
	case errors.Is(err, keys.ErrVersionConflict):
		return apierror.New(http.StatusConflict, apierror.TypeInvalidRequest,
			"the record was changed by another request at the same time and nothing was stored; read it again and retry").WithCode("version_conflict")
	case errors.Is(err, keys.ErrIdempotencyMismatch):
		e := apierror.New(http.StatusUnprocessableEntity, apierror.TypeInvalidRequest,
			"this Idempotency-Key was used for a request with other parameters; send a new Idempotency-Key for a new request").WithCode("idempotency_key_reused")
		e.Param = "Idempotency-Key"
		return e
	case errors.Is(err, keys.ErrRevoked):
		return apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "the key is revoked; create a new one").WithCode("api_key_revoked")
	}
	return nil
}

func noSealer() error {
	return apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest,
		"provider credentials cannot be stored: the gateway has no encryption key for them (the operator sets llm { keys { encryption_key … } })").WithCode("encryption_key_not_configured")
}

// object decodes a JSON object body into a map of raw members, so each
// route tells a member given as null from one left out. The body is read
// strictly: a member given twice (names compared after unescaping) is a
// 400 naming it, never one copy silently winning.
func object(body []byte) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	// The router read JSON bodies strictly already; a body sent under
	// another content type is read the same way here.
	if err := controlplane.CheckBody(body); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, apierror.BadRequest("", "the request body must be a JSON object")
	}
	return m, nil
}

// field decodes member name of m into into when given (and not null).
func field(m map[string]json.RawMessage, name string, into any) (bool, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return false, apierror.BadRequest(name, "%s has the wrong type", name)
	}
	return true, nil
}

// isNull reports whether member name is given as null.
func isNull(m map[string]json.RawMessage, name string) bool {
	raw, ok := m[name]
	return ok && string(raw) == "null"
}

// Bounds on what the API stores.
const (
	maxName        = 256
	maxDescription = 4096
	maxScopes      = 100
	maxModels      = 200
	maxLimitsBytes = 16 << 10
	maxMetadata    = 16 << 10
	maxSlug        = 128
	maxPage        = 1000
	maxIdemKey     = 255
	maxGrace       = 30 * 24 * time.Hour
	maxConfigBytes = 256 << 10
	maxVKBytes     = 64 << 10
)

// text decodes string member name (at most max bytes) into into. Free
// text (a description, a note) may hold tabs and line breaks but no other
// control or format character.
func text(m map[string]json.RawMessage, name string, max int, into *string) (bool, error) {
	ok, err := field(m, name, into)
	if err == nil && len(*into) > max {
		err = apierror.BadRequest(name, "%s must be at most %d bytes", name, max)
	}
	if err == nil && ok && !printable(*into, true) {
		err = apierror.BadRequest(name, "%s must not hold control or format characters (other than tabs and line breaks)", name)
	}
	return ok, err
}

// label is text for a name shown in lists, logs and the ledger: printable
// characters only (no control character, no format character such as a
// bidi override or a zero-width space).
func label(m map[string]json.RawMessage, name string, max int, into *string) (bool, error) {
	ok, err := text(m, name, max, into)
	if err == nil && ok && !printable(*into, false) {
		err = apierror.BadRequest(name, "%s must be printable characters: no control character (NUL, newline, ESC, …) and no format character (bidi overrides, zero-width spaces, …)", name)
	}
	return ok, err
}

// printable reports whether s holds no character of Unicode's Cc
// (control) or Cf (format: bidi embeddings, overrides and isolates
// U+202A–202E and U+2066–2069, zero-width characters, …) categories and
// is valid UTF-8; lines allows tab, CR and LF.
func printable(s string, lines bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if lines && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// rawLimits keeps rate_limits / usage_limits as given (bounded), for the
// reference's shapes; the gateway's own limits are rate-limit policies.
func rawLimits(m map[string]json.RawMessage, name string, array bool) (json.RawMessage, bool, error) {
	raw, ok := m[name]
	if !ok {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return nil, true, nil
	}
	t := bytes.TrimSpace(raw)
	if len(t) > maxLimitsBytes || len(t) == 0 || (array && t[0] != '[') || (!array && t[0] != '{') {
		kind := "a JSON object"
		if array {
			kind = "a JSON array"
		}
		return nil, false, apierror.BadRequest(name, "%s must be %s of at most %d bytes", name, kind, maxLimitsBytes)
	}
	return json.RawMessage(t), true, nil
}

func expiresAt(m map[string]json.RawMessage, now time.Time) (*time.Time, bool, error) {
	if isNull(m, "expires_at") {
		return nil, true, nil
	}
	var s string
	ok, err := field(m, "expires_at", &s)
	if !ok || err != nil {
		return nil, false, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, false, apierror.BadRequest("expires_at", "expires_at must be an RFC 3339 time")
	}
	if !t.After(now) {
		return nil, false, apierror.BadRequest("expires_at", "expires_at must be in the future")
	}
	t = t.UTC()
	return &t, true, nil
}

func queryInt(c *call, name string, def, lo, hi int) (int, error) {
	s := c.r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo {
		return 0, apierror.BadRequest(name, "%s must be an integer of at least %d", name, lo)
	}
	return min(n, hi), nil
}

// validSlug reports whether s can name a record in a header.
func validSlug(s string) bool {
	if s == "" || len(s) > maxSlug {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.", c) >= 0) {
			return false
		}
	}
	return true
}

// given lists the member names of m, for the audit log.
func given(m map[string]json.RawMessage, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, ok := m[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// list is the reference's list answer.
type list[T any] struct {
	Object  string `json:"object"`
	Total   int    `json:"total"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id,omitempty"`
}

// Every handler of this package asks keys.Authorize before it reads or
// writes a record (see keys/authz.go for the rule); this file turns the
// call's identity into the rule's actor, records into its targets, and
// its refusals into the API's errors.

// actor returns the caller as the rule sees it (built once per call).
func (c *call) actor() *keys.Actor {
	if c.who == nil {
		// The caller carries its key's usage limit: no second lookup.
		c.who = keys.ActorOf(c.id)
	}
	return c.who
}

// authorize applies the rule; a refusal is the API's error.
func (c *call) authorize(act keys.Action, t *keys.Target) error {
	d := keys.Authorize(c.actor(), act, t)
	if d == nil {
		return nil
	}
	return denial(d)
}

func denial(d *keys.Denial) *apierror.Error {
	typ := apierror.TypeInvalidRequest
	if d.Status == http.StatusNotFound {
		typ = apierror.TypeNotFound
	}
	e := apierror.New(d.Status, typ, d.Message)
	if d.Code != "" {
		e = e.WithCode(d.Code)
	}
	if d.Param != "" {
		e.Param = d.Param
	}
	return e
}

// workspaceTarget is the workspace a list or create names (named, else
// the caller's own), with the organisation it belongs to.
func (c *call) workspaceTarget(kind, named string) (*keys.Target, error) {
	ws := named
	if ws == "" {
		ws = c.id.WorkspaceID
	} else if uuid.Validate(ws) != nil {
		return nil, apierror.BadRequest("workspace_id", "workspace_id must be a UUID")
	}
	return &keys.Target{Kind: kind, OrganisationID: c.workspaceOrganisation(ws), WorkspaceID: ws, Named: true}, nil
}

// listScope is the target of a list: the workspace named, else the
// caller's own for a workspace key and the whole organisation for an
// organisation key. It returns the workspace filter ("" for all).
func (c *call) listScope(kind, named string) (string, error) {
	if named == "" && c.id.Type == keys.TypeOrganisation {
		return "", c.authorize(keys.ActionList, &keys.Target{Kind: kind, OrganisationID: c.id.OrganisationID, Named: true})
	}
	t, err := c.workspaceTarget(kind, named)
	if err != nil {
		return "", err
	}
	return t.WorkspaceID, c.authorize(keys.ActionList, t)
}

// namedWorkspace checks the workspace a call on one record names with
// ?workspace_id= (none: the caller's own) and returns it.
func (c *call) namedWorkspace(kind string, act keys.Action) (string, error) {
	named := c.r.URL.Query().Get("workspace_id")
	t, err := c.workspaceTarget(kind, named)
	if err != nil {
		return "", err
	}
	if named == "" {
		return t.WorkspaceID, nil
	}
	return t.WorkspaceID, c.authorize(act, t)
}

// workspaceOrganisation is the organisation workspace ws belongs to: that
// of a Caddyfile key or of a record there of another organisation than
// the caller's, else the caller's (a workspace no other organisation
// holds records in is the caller's to use).
func (c *call) workspaceOrganisation(ws string) string {
	if ws == c.id.WorkspaceID {
		return c.id.OrganisationID
	}
	if org, ok := c.app.ForeignOrganisation(ws, c.id.OrganisationID); ok {
		return org
	}
	return c.id.OrganisationID
}

// grantOf is an API key record's grant.
func grantOf(r *keys.APIKey) *keys.Grant {
	return &keys.Grant{Organisation: r.Type == keys.TypeOrganisation, Scopes: r.Scopes,
		AllowedModels: r.AllowedModels, UsageLimits: r.UsageLimits}
}

// keyTarget is an API key record as the rule's target.
func keyTarget(r *keys.APIKey) *keys.Target {
	return &keys.Target{Kind: keys.KindAPIKey, ID: r.ID, OrganisationID: r.OrganisationID,
		WorkspaceID: r.WorkspaceID, Source: keys.SourceAPI, Grant: grantOf(r)}
}

// configKeyTarget is a Caddyfile key as the rule's target.
func configKeyTarget(id *identity.Caller) *keys.Target {
	g := keys.GrantOf(id)
	return &keys.Target{Kind: keys.KindAPIKey, ID: id.KeyID, OrganisationID: id.OrganisationID,
		WorkspaceID: id.WorkspaceID, Source: keys.SourceConfig, Grant: &g}
}

// sharedTarget is a Caddyfile virtual key or config: every key's to use,
// nobody's to change.
func sharedTarget(kind, name string) *keys.Target {
	return &keys.Target{Kind: kind, ID: name, Source: keys.SourceConfig, Shared: true}
}
