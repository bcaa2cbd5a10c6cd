// Package usersapi is the llm.api.users module: GET /v1/users lists the
// identity provider's users the record store keeps (keys/users.go), and
// GET /v1/users/{id} reads one, each within the caller's reach as the API
// keys are (a workspace key its workspace, an organisation key its
// organisation, never another's).
package usersapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// Scopes, named as the API keys' are.
const (
	ScopeList = "users.list"
	ScopeRead = "users.read"
)

// Paging bounds.
const (
	defaultPageSize = 50
	maxPageSize     = 100
	maxPage         = 10_000
	maxSearch       = 128
)

func init() { caddy.RegisterModule(Module{}) }

// Module is the llm.api.users module.
type Module struct {
	app *app.App
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".users", New: func() caddy.Module { return new(Module) }}
}

// Provision takes the llm app, whose record store holds the users.
func (m *Module) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	if err != nil {
		return err
	}
	m.app = a
	return nil
}

// Routes implements controlplane.Module.
func (m *Module) Routes() []controlplane.Route {
	return []controlplane.Route{
		{Method: http.MethodGet, Path: "/v1/users", Scope: ScopeList, Handler: m.handle(list)},
		{Method: http.MethodGet, Path: "/v1/users/{id}", Scope: ScopeRead, Handler: m.handle(get)},
	}
}

// MapError implements controlplane.Module: the store's errors need no
// mapping here.
func (*Module) MapError(error) *apierror.Error { return nil }

func (m *Module) handle(fn func(*controlplane.Call, *keys.Store) (any, error)) controlplane.Handler {
	return func(c *controlplane.Call) (any, error) {
		store := m.app.KeyStore()
		if store == nil || !store.Ready() {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the key store is unavailable; try again")
		}
		return fn(c, store)
	}
}

// userObject is a user as the API answers it.
type userObject struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Type           string    `json:"type"`
	WorkspaceID    string    `json:"workspace_id"`
	OrganisationID string    `json:"organisation_id"`
	Scopes         []string  `json:"scopes"`
	AllowedModels  []string  `json:"allowed_models"`
	Status         string    `json:"status"`
	StatusReason   string    `json:"status_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Object         string    `json:"object"`
}

func toObject(u *keys.User) userObject {
	o := userObject{ID: u.ID, Name: u.Name, Type: u.Type, WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID,
		Scopes: u.Scopes, AllowedModels: u.AllowedModels, Status: u.Status, StatusReason: u.StatusReason,
		CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt, Object: "user"}
	if o.Scopes == nil {
		o.Scopes = []string{}
	}
	if o.AllowedModels == nil {
		o.AllowedModels = []string{}
	}
	return o
}

// list: GET /v1/users?search=&status=&workspace_id=&page_size=&current_page=
// → the users within reach, by name.
func list(c *controlplane.Call, store *keys.Store) (any, error) {
	q := c.Request.URL.Query()
	search, status, ws := strings.ToLower(q.Get("search")), q.Get("status"), q.Get("workspace_id")
	if len(search) > maxSearch {
		return nil, apierror.BadRequest("search", "must be at most %d bytes", maxSearch)
	}
	if status != "" && status != keys.UserActive && status != keys.UserDisabled {
		return nil, apierror.BadRequest("status", "must be active or disabled")
	}
	size, page := defaultPageSize, 0
	var err error
	if v := q.Get("page_size"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > maxPageSize {
			return nil, apierror.BadRequest("page_size", "must be a whole number from 1 to %d", maxPageSize)
		}
	}
	if v := q.Get("current_page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 0 || page > maxPage {
			return nil, apierror.BadRequest("current_page", "must be a whole number from 0 to %d", maxPage)
		}
	}
	all := store.Users(func(u *keys.User) bool {
		return keys.Manages(c.Caller, u.OrganisationID, u.WorkspaceID) && (ws == "" || u.WorkspaceID == ws) &&
			(status == "" || u.Status == status) && (search == "" || strings.Contains(strings.ToLower(u.Name), search))
	})
	out := struct {
		Object  string       `json:"object"`
		Total   int          `json:"total"`
		Data    []userObject `json:"data"`
		HasMore bool         `json:"has_more"`
	}{Object: "list", Total: len(all), Data: []userObject{}}
	from := min(page*size, len(all))
	for _, u := range all[from:min(from+size, len(all))] {
		out.Data = append(out.Data, toObject(u))
	}
	out.HasMore = from+size < len(all)
	return out, nil
}

// get: GET /v1/users/{id} → one user within reach (404 otherwise, as
// for a user that does not exist, so reach tells nothing).
func get(c *controlplane.Call, store *keys.Store) (any, error) {
	id := c.Request.PathValue("id")
	u, ok := store.UserRecord(id)
	if !ok || !keys.Manages(c.Caller, u.OrganisationID, u.WorkspaceID) {
		return nil, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "user %s not found", apierror.QuoteID(id))
	}
	return toObject(u), nil
}
