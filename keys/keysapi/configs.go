package keysapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// configView is a saved config as GET /v1/configs/{slug} answers it
// (config and version_id only there, not in lists).
type configView struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Slug           string          `json:"slug"`
	WorkspaceID    string          `json:"workspace_id"`
	OrganisationID string          `json:"organisation_id"`
	IsDefault      int             `json:"is_default"`
	Status         string          `json:"status"`
	OwnerID        string          `json:"owner_id,omitempty"`
	CreatedAt      *time.Time      `json:"created_at"`
	LastUpdatedAt  *time.Time      `json:"last_updated_at"`
	Config         json.RawMessage `json:"config,omitempty"`
	Format         string          `json:"format,omitempty"`
	Type           string          `json:"type,omitempty"`
	VersionID      string          `json:"version_id,omitempty"`
	Versions       int             `json:"versions,omitempty"`
	Aliases        []string        `json:"aliases,omitempty"`
	Source         string          `json:"source"`
	Object         string          `json:"object"`
}

// viewConfig shows an API config; full adds its latest version, with
// every credential redacted (keys.RedactConfig).
func viewConfig(r *keys.Config, full bool) *configView {
	v := &configView{ID: r.ID, Name: r.Name, Slug: r.Slug, WorkspaceID: r.WorkspaceID, OrganisationID: r.OrganisationID,
		IsDefault: r.IsDefault, Status: r.Status, CreatedAt: &r.CreatedAt, LastUpdatedAt: &r.UpdatedAt,
		Versions: len(r.Versions), Aliases: r.Aliases, Source: keys.SourceAPI, Object: "config"}
	if full {
		if l := r.Latest(); l != nil {
			v.Config, v.VersionID = redacted(l.Config), l.VersionID
		}
		v.Format, v.Type = "json", "ROUTING_CONFIG"
	}
	return v
}

// viewConfigConfig shows a Caddyfile config, its credentials redacted.
func viewConfigConfig(id string, body []byte, full bool) *configView {
	v := &configView{ID: id, Name: id, Slug: id, Status: keys.StatusActive, Source: keys.SourceConfig, Object: "config"}
	if full {
		v.Config, v.Format, v.Type = redacted(body), "json", "ROUTING_CONFIG"
	}
	return v
}

// redacted is a config as answered: every credential replaced by "****"
// (keys.RedactConfig). API configs are stored masked already; the
// Caddyfile's are not. One that does not decode is left out, never
// answered whole.
func redacted(body []byte) json.RawMessage {
	out, _ := keys.RedactConfig(body)
	return out
}

// configBody reads and validates the config member for workspace ws.
func (c *call) configBody(m map[string]json.RawMessage, org, ws string) (json.RawMessage, error) {
	raw, ok := m["config"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	// The reference's SDK may send the config as a JSON string.
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > maxConfigBytes {
		return nil, apierror.BadRequest("config", "config must be at most %d bytes", maxConfigBytes)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, apierror.BadRequest("config", "config must be a JSON object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, apierror.BadRequest("config", "config must be a JSON object")
	}
	if err := c.app.CheckConfig(compact.Bytes(), org, ws); err != nil {
		return nil, apierror.BadRequest("config", "invalid config: %v", err)
	}
	return compact.Bytes(), nil
}

// maxAliases bounds a config's model aliases.
const maxAliases = 32

// aliases reads the aliases member into into: a list (null or [] clears
// it) of distinct model names, each 1 to maxSlug printable characters
// without spaces, none of them an alias of the Caddyfile's (which would
// win: app.ModelAlias). It reports whether the member was given.
func (c *call) aliases(m map[string]json.RawMessage, into *[]string) (bool, error) {
	raw, ok := m["aliases"]
	if !ok {
		return false, nil
	}
	var list []string
	if _, err := field(m, "aliases", &list); err != nil {
		return false, err
	}
	if len(list) > maxAliases {
		return false, apierror.BadRequest("aliases", "aliases must list at most %d model names", maxAliases)
	}
	seen := make(map[string]bool, len(list))
	for i, a := range list {
		param := "aliases[" + strconv.Itoa(i) + "]"
		switch {
		case a == "" || len(a) > maxSlug || strings.ContainsAny(a, " \t\r\n") || !printable(a, false):
			return false, apierror.BadRequest(param, "an alias is a model name: 1 to %d printable characters, no spaces", maxSlug)
		case seen[a]:
			return false, apierror.BadRequest(param, "alias %s is listed twice", apierror.QuoteID(a))
		case c.app.OperatorModelAlias(a):
			return false, aliasTaken(a, "the gateway's configuration")
		}
		seen[a] = true
	}
	if string(raw) == "null" || len(list) == 0 {
		list = nil
	}
	*into = list
	return true, nil
}

// aliasTaken is the 409 of an alias another config holds.
func aliasTaken(alias, holder string) *apierror.Error {
	e := apierror.Newf(http.StatusConflict, apierror.TypeInvalidRequest, "model alias %s is taken by %s", apierror.QuoteID(alias), holder).WithCode("alias_taken")
	e.Param = "aliases"
	return e
}

// configStoreError is storeError for configs, with the alias clash.
func configStoreError(err error, slug string) error {
	var at *keys.AliasTakenError
	if errors.As(err, &at) {
		return aliasTaken(at.Alias, "config "+apierror.QuoteID(at.Slug))
	}
	return storeError(err, "config", slug)
}

// createConfig: POST /v1/configs {name, config, isDefault, workspace_id, aliases}
// → {id, version_id, slug, object}. The config is checked like the
// x-gateway-config header and a Caddyfile config.
func createConfig(c *call) (any, error) {
	if err := c.authorize(keys.ActionCreate, &keys.Target{Kind: keys.KindConfig, OrganisationID: c.id.OrganisationID, WorkspaceID: c.id.WorkspaceID}); err != nil {
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
	t, err := c.workspaceTarget(keys.KindConfig, wsName)
	if err != nil {
		return nil, err
	}
	if err := c.authorize(keys.ActionCreate, t); err != nil {
		return nil, err
	}
	ws := t.WorkspaceID
	r := &keys.Config{OrganisationID: t.OrganisationID, WorkspaceID: ws}
	if _, err := label(m, "name", maxName, &r.Name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(r.Name) == "" {
		return nil, apierror.BadRequest("name", "name is required")
	}
	if _, err := field(m, "isDefault", &r.IsDefault); err != nil {
		return nil, err
	}
	if _, err := c.aliases(m, &r.Aliases); err != nil {
		return nil, err
	}
	body, err := c.configBody(m, r.OrganisationID, ws)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, apierror.BadRequest("config", "config is required")
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
	if _, ok := c.app.ConfigConfigs()[r.Slug]; ok {
		return nil, c.authorize(keys.ActionCreate, sharedTarget(keys.KindConfig, r.Slug))
	}
	if !explicit {
		if _, taken := c.store.ConfigRecord(ws, r.Slug); taken {
			r.Slug += "-" + strings.ToLower(keys.NewKey()[3:9])
		}
	}
	if err := c.store.CreateConfig(c.r.Context(), r, body); err != nil {
		return nil, configStoreError(err, r.Slug)
	}
	c.audit("config.create", "config", r.ID, r.WorkspaceID, r.OrganisationID, given(m, "name", "config", "isDefault", "workspace_id", "slug", "aliases"))
	return map[string]string{"id": r.ID, "version_id": r.Latest().VersionID, "slug": r.Slug, "object": "config"}, nil
}

// listConfigs: GET /v1/configs[?workspace_id=] → the Caddyfile's configs
// and the API's within reach.
func listConfigs(c *call) (any, error) {
	filter, err := c.listScope(keys.KindConfig, c.r.URL.Query().Get("workspace_id"))
	if err != nil {
		return nil, err
	}
	cfgs := c.app.ConfigConfigs()
	ids := make([]string, 0, len(cfgs))
	for id := range cfgs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	data := make([]*configView, 0, len(ids))
	for _, id := range ids {
		data = append(data, viewConfigConfig(id, cfgs[id], false))
	}
	for _, r := range c.store.Configs(func(r *keys.Config) bool { return c.lists(r.OrganisationID, r.WorkspaceID, "", filter) }) {
		data = append(data, viewConfig(r, false))
	}
	return list[*configView]{Object: "list", Total: len(data), Data: data}, nil
}

// findConfig returns the Caddyfile's config slug (body set), else that of
// the caller's workspace by slug (or by id), when the rule lets the caller
// do act to it; else the rule's refusal or a 404.
func (c *call) findConfig(slug string, act keys.Action) (*keys.Config, []byte, error) {
	if b, ok := c.app.ConfigConfigs()[slug]; ok {
		return nil, b, c.authorize(act, sharedTarget(keys.KindConfig, slug))
	}
	ws, err := c.namedWorkspace(keys.KindConfig, act)
	if err != nil {
		return nil, nil, err
	}
	r, ok := c.store.ConfigRecord(ws, slug)
	if !ok {
		// The node SDK's configs.delete names the config by id.
		r, ok = c.store.ConfigByID(slug)
	}
	if ok {
		return r, nil, c.authorize(act, &keys.Target{Kind: keys.KindConfig, ID: slug,
			OrganisationID: r.OrganisationID, WorkspaceID: r.WorkspaceID, Source: keys.SourceAPI})
	}
	if err := c.authorize(act, &keys.Target{Kind: keys.KindConfig, ID: slug, OrganisationID: c.id.OrganisationID, WorkspaceID: ws}); err != nil {
		return nil, nil, err
	}
	return nil, nil, notFound("config", slug)
}

// getConfig: GET /v1/configs/{slug}.
func getConfig(c *call) (any, error) {
	slug := c.r.PathValue("slug")
	r, b, err := c.findConfig(slug, keys.ActionRead)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return viewConfigConfig(slug, b, true), nil
	}
	return viewConfig(r, true), nil
}

// updateConfig: PUT /v1/configs/{slug} {name, config, status, aliases} →
// {version_id, object}. A config makes a new version; the previous ones
// are kept (GET /v1/configs/{slug}/versions).
func updateConfig(c *call) (any, error) {
	cur, _, err := c.findConfig(c.r.PathValue("slug"), keys.ActionUpdate)
	if err != nil {
		return nil, err
	}
	m, err := object(c.body)
	if err != nil {
		return nil, err
	}
	body, err := c.configBody(m, cur.OrganisationID, cur.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var aliases []string
	setAliases, err := c.aliases(m, &aliases)
	if err != nil {
		return nil, err
	}
	r, err := c.store.UpdateConfig(c.r.Context(), cur.ID, body, func(r *keys.Config) error {
		if _, err := label(m, "name", maxName, &r.Name); err != nil {
			return err
		}
		if setAliases {
			r.Aliases = aliases
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
	})
	if err != nil {
		return nil, configStoreError(err, cur.Slug)
	}
	c.audit("config.update", "config", r.ID, r.WorkspaceID, r.OrganisationID, given(m, "name", "config", "status", "aliases"))
	return map[string]string{"version_id": r.Latest().VersionID, "object": "config"}, nil
}

// deleteConfig: DELETE /v1/configs/{slug} → {}.
func deleteConfig(c *call) (any, error) {
	cur, _, err := c.findConfig(c.r.PathValue("slug"), keys.ActionDelete)
	if err != nil {
		return nil, err
	}
	if err := c.store.DeleteConfig(c.r.Context(), cur.ID); err != nil {
		return nil, storeError(err, "config", cur.Slug)
	}
	c.audit("config.delete", "config", cur.ID, cur.WorkspaceID, cur.OrganisationID, nil)
	return struct{}{}, nil
}

// listConfigVersions: GET /v1/configs/{slug}/versions → every kept
// version, oldest first.
func listConfigVersions(c *call) (any, error) {
	slug := c.r.PathValue("slug")
	r, _, err := c.findConfig(slug, keys.ActionRead)
	if err != nil {
		return nil, err
	}
	if r == nil {
		// A Caddyfile config has one version, the Caddyfile's.
		return nil, readOnly("config", slug)
	}
	out := make([]keys.ConfigVersion, len(r.Versions))
	for i, v := range r.Versions {
		v.Config = redacted(v.Config)
		out[i] = v
	}
	return list[keys.ConfigVersion]{Object: "list", Total: len(out), Data: out}, nil
}
