package keysapi

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// vkView is a virtual key as GET /v1/virtual-keys/{slug} answers it. The
// provider key is never in it: masked_api_key keeps two characters at
// each end of a long key, nothing of a short one.
type vkView struct {
	ID             string             `json:"id"`
	Slug           string             `json:"slug"`
	Name           string             `json:"name"`
	Note           *string            `json:"note"`
	Provider       string             `json:"ai_provider_name"`
	ModelConfig    providers.Settings `json:"model_config"`
	MaskedAPIKey   string             `json:"masked_api_key"`
	Status         string             `json:"status"`
	UsageLimits    json.RawMessage    `json:"usage_limits"`
	RateLimits     json.RawMessage    `json:"rate_limits"`
	ExpiresAt      *time.Time         `json:"expires_at"`
	WorkspaceID    string             `json:"workspace_id"`
	OrganisationID string             `json:"organisation_id"`
	CreatedAt      *time.Time         `json:"created_at"`
	Source         string             `json:"source"`
	Object         string             `json:"object"`
}

func viewVK(r *keys.VirtualKey) *vkView {
	mc := r.Settings
	mc.Provider = ""
	v := &vkView{
		ID: r.ID, Slug: r.Slug, Name: r.Name, Provider: r.Settings.Provider, ModelConfig: mc,
		MaskedAPIKey: r.KeyHint, Status: r.Status, UsageLimits: orNull(r.UsageLimits), RateLimits: orNull(r.RateLimits),
		ExpiresAt: r.ExpiresAt, WorkspaceID: r.WorkspaceID, OrganisationID: r.OrganisationID, CreatedAt: &r.CreatedAt,
		Source: keys.SourceAPI, Object: "virtual-key",
	}
	if r.Note != "" {
		v.Note = &r.Note
	}
	if v.MaskedAPIKey == "" && r.Sealed != nil {
		v.MaskedAPIKey = "****"
	}
	return v
}

// viewConfigVK shows a Caddyfile virtual key: its provider and the
// address fields, never a credential.
func viewConfigVK(name string, s *providers.Settings) *vkView {
	mc := providers.Settings{ResourceName: s.ResourceName, DeploymentID: s.DeploymentID, APIVersion: s.APIVersion,
		Deployments: s.Deployments, CloudARegion: s.CloudARegion, CloudCProjectID: s.CloudCProjectID, CloudCRegion: s.CloudCRegion}
	masked := ""
	if s.APIKey != "" || s.CloudASecretAccessKey != "" || len(s.CloudCServiceAccountJSON) > 0 {
		masked = "****"
	}
	return &vkView{ID: name, Slug: name, Name: name, Provider: s.Provider, ModelConfig: mc, MaskedAPIKey: masked,
		Status: keys.StatusActive, UsageLimits: json.RawMessage("null"), RateLimits: json.RawMessage("null"),
		Source: keys.SourceConfig, Object: "virtual-key"}
}

// vkMeta are the members of a virtual key body that are not provider
// settings; the reference's camelCase Azure fields map to settings.
var vkMeta = []string{"name", "slug", "note", "workspace_id", "usage_limits", "rate_limits", "expires_at", "status"}

var vkAliases = map[string]string{
	"key": "api_key", "apiVersion": "api_version", "resourceName": "resource_name", "deploymentName": "deployment_id",
}

// settings merges the provider settings members of m into s, strictly:
// an unknown member is a 400 naming it.
func (c *call) settings(m map[string]json.RawMessage, s *providers.Settings) error {
	size := 0
	for _, v := range m {
		size += len(v)
	}
	if size > maxVKBytes {
		return apierror.BadRequest("", "a virtual key's settings must be at most %d bytes", maxVKBytes)
	}
	fields := map[string]json.RawMessage{}
	for k, v := range m {
		if slices.Contains(vkMeta, k) || k == "id" {
			continue
		}
		if a, ok := vkAliases[k]; ok {
			k = a
		}
		if string(v) != "null" {
			fields[k] = v
		}
	}
	cur, _ := json.Marshal(s)
	var merged map[string]json.RawMessage
	_ = json.Unmarshal(cur, &merged)
	for k, v := range fields {
		merged[k] = v
	}
	raw, _ := json.Marshal(merged)
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	out := new(providers.Settings)
	if err := dec.Decode(out); err != nil {
		return apierror.BadRequest("", "invalid virtual key settings: %v", err)
	}
	if err := c.app.CheckVirtualKey(out); err != nil {
		return apierror.BadRequest("", "%v", err)
	}
	*s = *out
	return nil
}

// vkFields decodes the non-settings members create and update share.
func vkFields(m map[string]json.RawMessage, r *keys.VirtualKey) error {
	if _, err := label(m, "name", maxName, &r.Name); err != nil {
		return err
	}
	if _, err := text(m, "note", maxDescription, &r.Note); err != nil {
		return err
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
	if t, ok, err := expiresAt(m, time.Now()); err != nil {
		return err
	} else if ok {
		r.ExpiresAt = t
	}
	var status string
	if _, err := field(m, "status", &status); err != nil {
		return err
	}
	switch status {
	case "":
	case keys.StatusActive, keys.StatusDisabled:
		r.Status = status
	default:
		return apierror.BadRequest("status", "status must be active or disabled")
	}
	return nil
}

// createVirtualKey: POST /v1/virtual-keys {name, provider, key, note, …}
// → {id, slug, object}. The slug is the body's, else made from the name.
func createVirtualKey(c *call) (any, error) {
	if err := c.authorize(keys.ActionCreate, &keys.Target{Kind: keys.KindVirtualKey, OrganisationID: c.id.OrganisationID, WorkspaceID: c.id.WorkspaceID}); err != nil {
		return nil, err
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	var wsName string
	if _, err := field(m, "workspace_id", &wsName); err != nil {
		return nil, err
	}
	t, err := c.workspaceTarget(keys.KindVirtualKey, wsName)
	if err != nil {
		return nil, err
	}
	if err := c.authorize(keys.ActionCreate, t); err != nil {
		return nil, err
	}
	ws := t.WorkspaceID
	r := &keys.VirtualKey{OrganisationID: t.OrganisationID, WorkspaceID: ws}
	if err := vkFields(m, r); err != nil {
		return nil, err
	}
	if strings.TrimSpace(r.Name) == "" {
		return nil, apierror.BadRequest("name", "name is required")
	}
	var st providers.Settings
	if err := c.settings(m, &st); err != nil {
		return nil, err
	}
	explicit, err := text(m, "slug", maxSlug, &r.Slug)
	if err != nil {
		return nil, err
	}
	if !explicit {
		r.Slug = prompts.Slugify(r.Name)
	}
	if !validSlug(r.Slug) {
		return nil, apierror.BadRequest("slug", "slug must be 1 to %d letters, digits, '-', '_' or '.'", maxSlug)
	}
	if _, ok := c.app.ConfigVirtualKey(r.Slug); ok {
		return nil, c.authorize(keys.ActionCreate, sharedTarget(keys.KindVirtualKey, r.Slug))
	}
	if !explicit {
		if _, taken := c.store.VirtualKeyRecord(ws, r.Slug); taken {
			r.Slug += "-" + strings.ToLower(keys.NewKey()[3:9])
		}
	}
	if err := c.store.CreateVirtualKey(c.r.Context(), r, st); err != nil {
		return nil, storeError(err, "virtual key", r.Slug)
	}
	c.tag(r.ID, r.Version)
	c.audit("virtual_key.create", "virtual_key", r.ID, r.WorkspaceID, r.OrganisationID, sortedNames(m))
	return map[string]string{"id": r.ID, "slug": r.Slug, "object": "virtual-key"}, nil
}

// sortedNames lists m's member names, sorted, for the audit log.
func sortedNames(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if a, ok := vkAliases[k]; ok {
			k = a
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// listVirtualKeys: GET /v1/virtual-keys[?workspace_id=&search=&status=]
// → the Caddyfile's virtual keys (every key can use them) and the API's
// within reach; search keeps those whose name or slug contains it,
// ignoring case, or whose id starts with it.
func listVirtualKeys(c *call) (any, error) {
	q := c.r.URL.Query()
	filter, err := c.listScope(keys.KindVirtualKey, q.Get("workspace_id"))
	if err != nil {
		return nil, err
	}
	sf, err := keySearch(q.Get("search"), q.Get("status"))
	if err != nil {
		return nil, err
	}
	names := c.app.ConfigVirtualKeyNames()
	slices.Sort(names)
	data := make([]*vkView, 0, len(names))
	for _, n := range names {
		if sf.matches("", n, keys.StatusActive) {
			s, _ := c.app.ConfigVirtualKey(n)
			data = append(data, viewConfigVK(n, s))
		}
	}
	for _, r := range c.store.VirtualKeys(func(r *keys.VirtualKey) bool {
		return c.lists(r.OrganisationID, r.WorkspaceID, "", filter) && (sf.matches(r.ID, r.Name, r.Status) || sf.matches(r.ID, r.Slug, r.Status))
	}) {
		data = append(data, viewVK(r))
	}
	return list[*vkView]{Object: "list", Total: len(data), Data: data}, nil
}

// findVK returns the Caddyfile's virtual key slug (cfg set), else that
// of the caller's workspace (an organisation key names another with
// ?workspace_id=), when the rule lets the caller do act to it; else the
// rule's refusal or a 404.
func (c *call) findVK(slug string, act keys.Action) (r *keys.VirtualKey, cfg *providers.Settings, err error) {
	if s, ok := c.app.ConfigVirtualKey(slug); ok {
		return nil, s, c.authorize(act, sharedTarget(keys.KindVirtualKey, slug))
	}
	ws, err := c.namedWorkspace(keys.KindVirtualKey, act)
	if err != nil {
		return nil, nil, err
	}
	if r, ok := c.store.VirtualKeyRecord(ws, slug); ok {
		return r, nil, c.authorize(act, &keys.Target{Kind: keys.KindVirtualKey, ID: r.Slug,
			OrganisationID: r.OrganisationID, WorkspaceID: r.WorkspaceID, Source: keys.SourceAPI})
	}
	if err := c.authorize(act, &keys.Target{Kind: keys.KindVirtualKey, ID: slug, OrganisationID: c.id.OrganisationID, WorkspaceID: ws}); err != nil {
		return nil, nil, err
	}
	return nil, nil, notFound("virtual key", slug)
}

// getVirtualKey: GET /v1/virtual-keys/{slug}.
func getVirtualKey(c *call) (any, error) {
	slug := c.r.PathValue("slug")
	r, cfg, err := c.findVK(slug, keys.ActionRead)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		return viewConfigVK(slug, cfg), nil
	}
	c.tag(r.ID, r.Version)
	return viewVK(r), nil
}

// updateVirtualKey: PUT /v1/virtual-keys/{slug} → {id, slug, object}.
func updateVirtualKey(c *call) (any, error) {
	cur, _, err := c.findVK(c.r.PathValue("slug"), keys.ActionUpdate)
	if err != nil {
		return nil, err
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	if _, ok := m["slug"]; ok {
		return nil, apierror.BadRequest("slug", "a virtual key's slug cannot change")
	}
	r, err := c.store.UpdateVirtualKey(c.r.Context(), cur.ID, func(r *keys.VirtualKey, st *providers.Settings) error {
		if err := vkFields(m, r); err != nil {
			return err
		}
		return c.settings(m, st)
	}, c.pre(cur.ID)...)
	if err != nil {
		return nil, c.writeError(err, "virtual key", cur.Slug)
	}
	c.tag(r.ID, r.Version)
	c.audit("virtual_key.update", "virtual_key", r.ID, r.WorkspaceID, r.OrganisationID, sortedNames(m))
	return map[string]string{"id": r.ID, "slug": r.Slug, "object": "virtual-key"}, nil
}

// deleteVirtualKey: DELETE /v1/virtual-keys/{slug} → {}.
func deleteVirtualKey(c *call) (any, error) {
	cur, _, err := c.findVK(c.r.PathValue("slug"), keys.ActionDelete)
	if err != nil {
		return nil, err
	}
	if err := c.store.DeleteVirtualKey(c.r.Context(), cur.ID, c.pre(cur.ID)...); err != nil {
		return nil, c.writeError(err, "virtual key", cur.Slug)
	}
	c.audit("virtual_key.delete", "virtual_key", cur.ID, cur.WorkspaceID, cur.OrganisationID, nil)
	return struct{}{}, nil
}

// rotateVirtualKey: POST /v1/virtual-keys/{slug}/rotate {key} replaces
// the provider key (every instance uses the new one from its next change
// notice). A retry with the same Idempotency-Key changes nothing again.
func rotateVirtualKey(c *call) (any, error) {
	cur, _, err := c.findVK(c.r.PathValue("slug"), keys.ActionRotate)
	if err != nil {
		return nil, err
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	var key string
	if ok, err := field(m, "key", &key); err != nil {
		return nil, err
	} else if !ok || key == "" {
		return nil, apierror.BadRequest("key", "key is required: the new provider key")
	}
	idem := c.r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdemKey {
		return nil, apierror.BadRequest("Idempotency-Key", "the Idempotency-Key header must be at most %d bytes", maxIdemKey)
	}
	r, replayed, err := c.store.RotateVirtualKey(c.r.Context(), cur.ID, idem, key, c.pre(cur.ID)...)
	if err != nil {
		return nil, c.writeError(err, "virtual key", cur.Slug)
	}
	c.tag(r.ID, r.Version)
	if replayed {
		return map[string]string{"id": r.ID, "slug": r.Slug, "object": "virtual-key"}, nil
	}
	c.audit("virtual_key.rotate", "virtual_key", r.ID, r.WorkspaceID, r.OrganisationID, []string{"api_key"})
	return map[string]string{"id": r.ID, "slug": r.Slug, "object": "virtual-key"}, nil
}
