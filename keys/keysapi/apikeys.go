package keysapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// keyView is a gateway key as GET /v1/api-keys/{id} answers it. The key
// itself never appears: only its first characters, masked.
type keyView struct {
	ID             string            `json:"id"`
	Key            string            `json:"key"`
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	Type           string            `json:"type"`
	OrganisationID string            `json:"organisation_id"`
	WorkspaceID    string            `json:"workspace_id"`
	UserID         *string           `json:"user_id"`
	Status         string            `json:"status"`
	CreatedAt      *time.Time        `json:"created_at"`
	LastUpdatedAt  *time.Time        `json:"last_updated_at"`
	CreationMode   string            `json:"creation_mode"`
	RateLimits     json.RawMessage   `json:"rate_limits"`
	UsageLimits    json.RawMessage   `json:"usage_limits"`
	ResetUsage     int               `json:"reset_usage"`
	Scopes         []string          `json:"scopes"`
	Defaults       identity.Defaults `json:"defaults"`
	AllowedModels  []string          `json:"allowed_models"`
	ExpiresAt      *time.Time        `json:"expires_at"`
	Source         string            `json:"source"`
	Object         string            `json:"object"`
}

func viewKey(r *keys.APIKey) *keyView {
	v := &keyView{
		ID: r.ID, Key: keys.Mask(r.Prefix), Name: r.Name, Description: r.Description,
		Type: r.Type + "-" + r.SubType, OrganisationID: r.OrganisationID, WorkspaceID: r.WorkspaceID,
		Status: r.Status, CreatedAt: &r.CreatedAt, LastUpdatedAt: &r.UpdatedAt, CreationMode: "api",
		RateLimits: orNull(r.RateLimits), UsageLimits: orNull(r.UsageLimits), Scopes: orEmpty(r.Scopes),
		Defaults: r.Defaults, AllowedModels: orEmpty(r.AllowedModels), ExpiresAt: r.ExpiresAt,
		Source: keys.SourceAPI, Object: "api-key",
	}
	if r.UserID != "" {
		v.UserID = &r.UserID
	}
	return v
}

// viewConfigKey is a Caddyfile key: nothing of its value is shown.
func viewConfigKey(id *identity.Caller) *keyView {
	scopes := id.Scopes
	if scopes == nil {
		scopes = []string{"*"}
	}
	return &keyView{
		ID: id.KeyID, Key: "****", Name: id.Name, Type: id.Type + "-service", OrganisationID: id.OrganisationID,
		WorkspaceID: id.WorkspaceID, Status: keys.StatusActive, CreationMode: "config",
		RateLimits: json.RawMessage("null"), UsageLimits: json.RawMessage("null"), Scopes: scopes,
		AllowedModels: []string{}, Source: keys.SourceConfig, Object: "api-key",
	}
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// keyFields decodes the members create and update share into r,
// returning the names given.
func (c *call) keyFields(m map[string]json.RawMessage, r *keys.APIKey) error {
	if _, err := label(m, "name", maxName, &r.Name); err != nil {
		return err
	}
	if _, err := text(m, "description", maxDescription, &r.Description); err != nil {
		return err
	}
	var scopes []string
	if ok, err := field(m, "scopes", &scopes); err != nil {
		return err
	} else if ok {
		if len(scopes) == 0 || len(scopes) > maxScopes {
			return apierror.BadRequest("scopes", "scopes must list between 1 and %d scopes", maxScopes)
		}
		for _, s := range scopes {
			if !keys.ValidScope(s) {
				return apierror.BadRequest("scopes", "unknown scope %s", apierror.QuoteID(s))
			}
		}
		r.Scopes = slices.Compact(slices.Sorted(slices.Values(scopes)))
	}
	if v, ok, err := rawLimits(m, "rate_limits", true); err != nil {
		return err
	} else if ok {
		r.RateLimits = v
	}
	if v, ok, err := rawLimits(m, "usage_limits", false); err != nil {
		return err
	} else if ok {
		r.UsageLimits = v
	}
	if raw, ok := m["defaults"]; ok {
		if err := c.defaults(raw, r); err != nil {
			return err
		}
	}
	var models []string
	if ok, err := field(m, "allowed_models", &models); err != nil {
		return err
	} else if ok || isNull(m, "allowed_models") {
		if len(models) > maxModels {
			return apierror.BadRequest("allowed_models", "allowed_models lists at most %d patterns", maxModels)
		}
		for _, p := range models {
			if !keys.ValidPattern(p) {
				return apierror.BadRequest("allowed_models", "allowed_models: %s is not a glob pattern", apierror.QuoteID(p))
			}
		}
		r.AllowedModels = models
	}
	if t, ok, err := expiresAt(m, time.Now()); err != nil {
		return err
	} else if ok {
		r.ExpiresAt = t
	}
	return nil
}

// defaults decodes the defaults member: a config or virtual key the key's
// workspace can use, and metadata.
func (c *call) defaults(raw json.RawMessage, r *keys.APIKey) error {
	if string(raw) == "null" {
		r.Defaults = identity.Defaults{}
		return nil
	}
	if len(raw) > maxMetadata {
		return apierror.BadRequest("defaults", "defaults must be at most %d bytes", maxMetadata)
	}
	var d struct {
		ConfigID   *string         `json:"config_id"`
		VirtualKey *string         `json:"virtual_key"`
		Metadata   json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return apierror.BadRequest("defaults", "defaults must be an object of config_id, virtual_key and metadata")
	}
	out := identity.Defaults{}
	res := c.app.For(&identity.Caller{OrganisationID: r.OrganisationID, WorkspaceID: r.WorkspaceID})
	if d.ConfigID != nil && *d.ConfigID != "" {
		if _, ok := res.SavedConfig(*d.ConfigID); !ok {
			return apierror.BadRequest("defaults.config_id", "defaults.config_id: no saved config %s in the key's workspace", apierror.QuoteID(*d.ConfigID))
		}
		out.ConfigID = *d.ConfigID
	}
	if d.VirtualKey != nil && *d.VirtualKey != "" {
		if _, ok := res.VirtualKey(*d.VirtualKey); !ok {
			return apierror.BadRequest("defaults.virtual_key", "defaults.virtual_key: no virtual key %s in the key's workspace", apierror.QuoteID(*d.VirtualKey))
		}
		out.VirtualKey = *d.VirtualKey
	}
	if len(d.Metadata) > 0 && string(d.Metadata) != "null" {
		md, err := ingress.ParseMetadata(string(d.Metadata))
		if err != nil {
			return apierror.BadRequest("defaults.metadata", "defaults.metadata must be a JSON object of at most %d bytes", ingress.MaxMetadataBytes)
		}
		out.Metadata = md
	}
	r.Defaults = out
	return nil
}

// createAPIKey: POST /v1/api-keys/{type}/{subtype} → {id, key, object}.
// The key is in this answer and nowhere else, ever.
func createAPIKey(c *call) (any, error) {
	if err := c.authorize(keys.ActionCreate, &keys.Target{Kind: keys.KindAPIKey, OrganisationID: c.id.OrganisationID, WorkspaceID: c.id.WorkspaceID}); err != nil {
		return nil, err
	}
	typ, sub := strings.Replace(c.r.PathValue("type"), "organization", "organisation", 1), c.r.PathValue("subtype")
	if typ != keys.TypeOrganisation && typ != keys.TypeWorkspace {
		return nil, apierror.BadRequest("type", "the key type must be organisation or workspace")
	}
	if sub != keys.SubTypeUser && sub != keys.SubTypeService {
		return nil, apierror.BadRequest("sub-type", "the key sub-type must be user or service")
	}
	if typ == keys.TypeOrganisation && c.id.Type != keys.TypeOrganisation {
		return nil, apierror.New(http.StatusForbidden, apierror.TypeInvalidRequest, "only an organisation key can create an organisation key").WithCode("workspace_forbidden")
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	var wsName string
	if _, err := field(m, "workspace_id", &wsName); err != nil {
		return nil, err
	}
	t, err := c.workspaceTarget(keys.KindAPIKey, wsName)
	if err != nil {
		return nil, err
	}
	if err := c.authorize(keys.ActionCreate, t); err != nil {
		return nil, err
	}
	r := &keys.APIKey{Type: typ, SubType: sub, OrganisationID: t.OrganisationID, WorkspaceID: t.WorkspaceID, CreatedBy: c.id.KeyID}
	if _, err := label(m, "user_id", maxName, &r.UserID); err != nil {
		return nil, err
	}
	if err := c.keyFields(m, r); err != nil {
		return nil, err
	}
	if strings.TrimSpace(r.Name) == "" {
		return nil, apierror.BadRequest("name", "name is required")
	}
	if len(r.Scopes) == 0 {
		return nil, apierror.BadRequest("scopes", "scopes is required: what the key may do through the management APIs (completions.write alone for a key that only calls models)")
	}
	// The new key: within the caller's grant, and not a Caddyfile key's
	// name (409).
	t.Grant = grantOf(r)
	if c.configKeyNamed(r.Name) {
		t.ID, t.Source = r.Name, keys.SourceConfig
	}
	if err := c.authorize(keys.ActionCreate, t); err != nil {
		return nil, err
	}
	key, err := c.store.CreateAPIKey(c.r.Context(), r)
	if err != nil {
		return nil, err
	}
	c.tag(r.ID, r.Version)
	c.audit("api_key.create", "api_key", r.ID, r.WorkspaceID, r.OrganisationID,
		given(m, "name", "description", "workspace_id", "user_id", "scopes", "rate_limits", "usage_limits", "defaults", "allowed_models", "expires_at"))
	return map[string]string{"id": r.ID, "key": key, "object": "api-key"}, nil
}

// listAPIKeys: GET /v1/api-keys?workspace_id=&search=&status=&page_size=
// &current_page= or &after=<id> (a cursor: the last id of the previous
// page). search keeps the keys whose name contains it, ignoring case, or
// whose id starts with it; status keeps one status. The Caddyfile's keys
// come first.
func listAPIKeys(c *call) (any, error) {
	q := c.r.URL.Query()
	filter, err := c.listScope(keys.KindAPIKey, q.Get("workspace_id"))
	if err != nil {
		return nil, err
	}
	sf, err := keySearch(q.Get("search"), q.Get("status"))
	if err != nil {
		return nil, err
	}
	size, err := queryInt(c, "page_size", 100, 1, maxPage)
	if err != nil {
		return nil, err
	}
	page, err := queryInt(c, "current_page", 0, 0, 1<<30)
	if err != nil {
		return nil, err
	}
	after := q.Get("after")
	var data []*keyView
	var fromConfig []*keyView
	for _, k := range c.app.ConfigKeys() {
		if c.lists(k.OrganisationID, k.WorkspaceID, k.Type, filter) && sf.matches(k.KeyID, k.Name, keys.StatusActive) {
			fromConfig = append(fromConfig, viewConfigKey(k))
		}
	}
	offset := 0
	if after == "" {
		skip := page * size
		if skip < len(fromConfig) {
			data = append(data, fromConfig[skip:min(len(fromConfig), skip+size)]...)
		} else {
			offset = skip - len(fromConfig)
		}
	}
	// The caller's reach as the list's scope (what lists keeps), so the
	// store reads that scope's keys only.
	a := c.actor()
	sf.Organisation, sf.Workspace = a.OrganisationID, filter
	if !a.Organisation {
		sf.Workspace, sf.NoOrgKeys = a.WorkspaceID, true
	}
	var recs []*keys.APIKey
	total, more := 0, false
	if a.Organisation || filter == "" || filter == a.WorkspaceID {
		recs, total, more = c.store.SearchAPIKeys(sf.KeyFilter, after, offset, size-len(data))
	}
	for _, r := range recs {
		data = append(data, viewKey(r))
	}
	out := list[*keyView]{Object: "list", Total: total + len(fromConfig), Data: orEmptyList(data), HasMore: more}
	if len(recs) > 0 {
		out.LastID = recs[len(recs)-1].ID
	}
	return out, nil
}

// keyFilter is a list's search and status.
type keyFilter struct{ keys.KeyFilter }

// keySearch checks a list's search and status parameters.
func keySearch(search, status string) (keyFilter, error) {
	if len(search) > keys.MaxSearch {
		return keyFilter{}, apierror.BadRequest("search", "search must be at most %d bytes", keys.MaxSearch)
	}
	switch status {
	case "", keys.StatusActive, keys.StatusDisabled, keys.StatusRevoked, keys.StatusExhausted:
	default:
		return keyFilter{}, apierror.BadRequest("status", "status must be active, disabled, revoked or exhausted")
	}
	return keyFilter{keys.KeyFilter{Search: strings.TrimSpace(search), Status: status}}, nil
}

// matches applies the filter to a record that is not in the store (a
// Caddyfile key, a virtual key), as SearchAPIKeys does to stored keys.
func (f keyFilter) matches(id, name, status string) bool {
	if f.Status != "" && status != f.Status {
		return false
	}
	q := strings.ToLower(f.Search)
	return q == "" || strings.Contains(strings.ToLower(name), q) || strings.HasPrefix(id, q)
}

func orEmptyList[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// lists reports whether a list narrowed to workspace filter ("": every
// workspace within reach) answers a key of (org, ws) of type typ.
func (c *call) lists(org, ws, typ, filter string) bool {
	return c.actor().Sees(org, ws, typ == keys.TypeOrganisation) && (filter == "" || ws == filter)
}

// configKeyNamed reports whether the Caddyfile declares a key of name.
func (c *call) configKeyNamed(name string) bool {
	for _, k := range c.app.ConfigKeys() {
		if k.Name == name {
			return true
		}
	}
	return false
}

// findKey returns API key id (or the Caddyfile identity of that id)
// when the rule lets the caller do act to it, else the rule's refusal: a
// 404 for a key out of reach, as for one that does not exist.
func (c *call) findKey(id string, act keys.Action) (*keys.APIKey, *identity.Caller, error) {
	for _, k := range c.app.ConfigKeys() {
		if k.KeyID == id {
			return nil, k, c.authorize(act, configKeyTarget(k))
		}
	}
	if uuid.Validate(id) == nil {
		if r, ok := c.store.APIKey(id); ok {
			return r, nil, c.authorize(act, keyTarget(r))
		}
	}
	if err := c.authorize(act, &keys.Target{Kind: keys.KindAPIKey, ID: id, OrganisationID: c.id.OrganisationID, WorkspaceID: c.id.WorkspaceID}); err != nil {
		return nil, nil, err
	}
	return nil, nil, notFound("api key", id)
}

// getAPIKey: GET /v1/api-keys/{id}.
func getAPIKey(c *call) (any, error) {
	r, cfg, err := c.findKey(c.r.PathValue("id"), keys.ActionRead)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		return viewConfigKey(cfg), nil
	}
	c.tag(r.ID, r.Version)
	return viewKey(r), nil
}

// changedFields names the members of a key record an update changed.
func changedFields(a, b *keys.APIKey) []string {
	var out []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"name", a.Name == b.Name},
		{"scopes", slices.Equal(a.Scopes, b.Scopes)},
		{"allowed_models", slices.Equal(a.AllowedModels, b.AllowedModels)},
		{"usage_limits", bytes.Equal(a.UsageLimits, b.UsageLimits)},
		{"rate_limits", bytes.Equal(a.RateLimits, b.RateLimits)},
		{"expires_at", a.ExpiresAt == nil && b.ExpiresAt == nil || a.ExpiresAt != nil && b.ExpiresAt != nil && a.ExpiresAt.Equal(*b.ExpiresAt)},
	} {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return out
}

// updateAPIKey: PUT /v1/api-keys/{id} with any of name, description,
// scopes, rate_limits, usage_limits, defaults, allowed_models, expires_at
// and status (active or disabled) → the key.
func updateAPIKey(c *call) (any, error) {
	cur, _, err := c.findKey(c.r.PathValue("id"), keys.ActionUpdate)
	if err != nil {
		return nil, err
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	var status string
	if _, err := field(m, "status", &status); err != nil {
		return nil, err
	}
	if status != "" && status != keys.StatusActive && status != keys.StatusDisabled {
		return nil, apierror.BadRequest("status", "status must be active or disabled (DELETE revokes a key)")
	}
	if cur.Status == keys.StatusRevoked {
		return nil, apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "the key is revoked; create a new one").WithCode("api_key_revoked")
	}
	r, err := c.store.UpdateAPIKey(c.r.Context(), cur.ID, func(r *keys.APIKey) error {
		if r.Status == keys.StatusRevoked {
			return apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "the key is revoked; create a new one").WithCode("api_key_revoked")
		}
		before := *r
		if err := c.keyFields(m, r); err != nil {
			return err
		}
		if strings.TrimSpace(r.Name) == "" {
			return apierror.BadRequest("name", "name must not be empty")
		}
		// The stored record, as it is and as it would be: within the
		// caller's reach and grant, not a change of the caller's own
		// limits, not a Caddyfile key's name.
		t := keyTarget(&before)
		t.Next, t.Changed = grantOf(r), changedFields(&before, r)
		if r.Name != before.Name && c.configKeyNamed(r.Name) {
			t.Source = keys.SourceConfig
			t.ID = r.Name
		}
		if err := c.authorize(keys.ActionUpdate, t); err != nil {
			return err
		}
		if status != "" {
			r.Status = status
		}
		return nil
	}, c.pre(cur.ID)...)
	if err != nil {
		return nil, c.writeError(err, "api key", cur.ID)
	}
	c.tag(r.ID, r.Version)
	c.audit("api_key.update", "api_key", r.ID, r.WorkspaceID, r.OrganisationID,
		given(m, "name", "description", "scopes", "rate_limits", "usage_limits", "defaults", "allowed_models", "expires_at", "status"))
	return viewKey(r), nil
}

// deleteAPIKey: DELETE /v1/api-keys/{id} revokes the key at once on every
// instance; the record stays, so its holder is told it was revoked.
func deleteAPIKey(c *call) (any, error) {
	cur, _, err := c.findKey(c.r.PathValue("id"), keys.ActionDelete)
	if err != nil {
		return nil, err
	}
	r, err := c.store.RevokeAPIKey(c.r.Context(), cur.ID, c.pre(cur.ID)...)
	if err != nil {
		return nil, c.writeError(err, "api key", cur.ID)
	}
	c.tag(r.ID, r.Version)
	c.audit("api_key.delete", "api_key", r.ID, r.WorkspaceID, r.OrganisationID, []string{"status"})
	return map[string]any{"id": r.ID, "object": "api-key", "deleted": true, "status": r.Status}, nil
}

// rotateAPIKey: POST /v1/api-keys/{id}/rotate {key_transition_period_ms}
// → {id, key, key_transition_expires_at}. The old key keeps working for
// the transition period (default one hour). A retry with the same
// Idempotency-Key header answers the same new key and rotates nothing.
func rotateAPIKey(c *call) (any, error) {
	cur, _, err := c.findKey(c.r.PathValue("id"), keys.ActionRotate)
	if err != nil {
		return nil, err
	}
	if cur.Status == keys.StatusRevoked {
		return nil, apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "the key is revoked; create a new one").WithCode("api_key_revoked")
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	grace := time.Hour
	var ms int64
	if ok, err := field(m, "key_transition_period_ms", &ms); err != nil {
		return nil, err
	} else if ok {
		if ms < 0 || time.Duration(ms)*time.Millisecond > maxGrace {
			return nil, apierror.BadRequest("key_transition_period_ms", "key_transition_period_ms must be between 0 and %d (30 days)", maxGrace.Milliseconds())
		}
		grace = time.Duration(ms) * time.Millisecond
	}
	idem := c.r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdemKey {
		return nil, apierror.BadRequest("Idempotency-Key", "the Idempotency-Key header must be at most %d bytes", maxIdemKey)
	}
	key, r, replayed, err := c.store.RotateAPIKey(c.r.Context(), cur.ID, idem, grace, c.pre(cur.ID)...)
	if err != nil {
		return nil, c.writeError(err, "api key", cur.ID)
	}
	c.tag(r.ID, r.Version)
	if !replayed {
		c.audit("api_key.rotate", "api_key", r.ID, r.WorkspaceID, r.OrganisationID, []string{"key"})
	}
	return map[string]any{"id": r.ID, "key": key, "key_transition_expires_at": r.PrevUntil, "object": "api-key"}, nil
}
