package keys

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// User records: a caller authenticated by the identity provider's token
// (identity.SourceOIDC, named identity.UserPrefix+sub) is recorded on
// first sight, so that every instance, and this one after a restart, can
// rebuild its caller without a token (a managed batch's lines run as
// their creator long after the token expired), list it, and disable it
// when the IdP stops admitting it. The record is the token's mapping as
// last seen: workspace, type, scopes, models and key defaults. It is
// written only when that mapping changes, which the caller's own token
// cache (jwtauth) limits to one look per token per cache_ttl; a request
// never writes otherwise.

// kindUsers is the users' folder in the store.
const kindUsers = "users"

// MaxUsers bounds the user records (a variable for tests only): a user first seen past it is not
// recorded (it still authenticates with its token; its batches do not
// run and it is not listed).
var MaxUsers = 100_000

// User statuses.
const (
	UserActive   = "active"
	UserDisabled = "disabled"
)

// ErrTooManyUsers is SeeUser's answer past MaxUsers.
var ErrTooManyUsers = errors.New("keys: the user records are full")

// User is the record of an identity provider's user.
type User struct {
	// ID is the user's caller KeyID (derived from the issuer and sub).
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Type           string             `json:"type"`
	WorkspaceID    string             `json:"workspace_id"`
	OrganisationID string             `json:"organisation_id"`
	Scopes         []string           `json:"scopes"`
	AllowedModels  []string           `json:"allowed_models,omitempty"`
	Defaults       *identity.Defaults `json:"defaults,omitempty"`
	Status         string             `json:"status"`
	// StatusReason says why a disabled user is (the IdP's refusal).
	StatusReason string    `json:"status_reason,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	Version      int64     `json:"version"`
}

// users is the index's part holding the user records.
type users struct {
	byID   map[string]*User
	byName map[string]*User
}

func (u *users) put(r *User) {
	if u.byID == nil {
		u.byID, u.byName = map[string]*User{}, map[string]*User{}
	}
	if old := u.byID[r.ID]; old != nil {
		delete(u.byName, old.Name)
	}
	u.byID[r.ID], u.byName[r.Name] = r, r
}

func (u *users) drop(id string) {
	if old := u.byID[id]; old != nil {
		delete(u.byName, old.Name)
		delete(u.byID, id)
	}
}

// sameMapping reports whether the record holds what caller c maps to and
// is active: then seeing c again writes nothing.
func (r *User) sameMapping(c *identity.Caller) bool {
	return r.Status == UserActive && r.Name == c.Name && r.Type == c.Type && r.WorkspaceID == c.WorkspaceID &&
		r.OrganisationID == c.OrganisationID && slices.Equal(r.Scopes, c.Scopes) &&
		slices.Equal(r.AllowedModels, c.AllowedModels) && defaultsEqual(r.Defaults, c.Defaults)
}

func defaultsEqual(a, b *identity.Defaults) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	if a.ConfigID != b.ConfigID || a.VirtualKey != b.VirtualKey || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for k, v := range a.Metadata {
		if b.Metadata[k] != v {
			return false
		}
	}
	return true
}

// SeeUser records token caller c: created on first sight, rewritten when
// its mapping changed (or it was disabled and the IdP admits it again),
// else left alone without any I/O. Only SourceOIDC callers are recorded.
func (s *Store) SeeUser(ctx context.Context, c *identity.Caller) error {
	if c == nil || c.Source != identity.SourceOIDC || !identity.ReservedName(c.Name) {
		return nil
	}
	s.mu.RLock()
	old := s.idx.users.byID[c.KeyID]
	n := len(s.idx.users.byID)
	s.mu.RUnlock()
	if old != nil && old.sameMapping(c) {
		return nil
	}
	if old == nil && n >= MaxUsers {
		return ErrTooManyUsers
	}
	return s.updateUser(ctx, c.KeyID, func(r *User) bool {
		if r.ID != "" && r.sameMapping(c) {
			return false
		}
		if r.ID == "" {
			r.ID, r.CreatedAt = c.KeyID, s.now()
		}
		r.Name, r.Type, r.WorkspaceID, r.OrganisationID = c.Name, c.Type, c.WorkspaceID, c.OrganisationID
		r.Scopes, r.AllowedModels = slices.Clone(c.Scopes), slices.Clone(c.AllowedModels)
		r.Defaults = nil
		if !c.Defaults.IsZero() {
			d := *c.Defaults
			r.Defaults = &d
		}
		r.Status, r.StatusReason = UserActive, ""
		return true
	})
}

// DisableUser marks the user id disabled with reason (the IdP refused
// its token: token_not_allowed); its batches stop and the console shows
// it so. A user never recorded, or already disabled, is left alone.
func (s *Store) DisableUser(ctx context.Context, id, reason string) error {
	s.mu.RLock()
	old := s.idx.users.byID[id]
	s.mu.RUnlock()
	if old == nil || old.Status == UserDisabled {
		return nil
	}
	return s.updateUser(ctx, id, func(r *User) bool {
		if r.ID == "" || r.Status == UserDisabled {
			return false
		}
		r.Status, r.StatusReason = UserDisabled, reason
		return true
	})
}

// updateUser applies change to the stored record id (a zero User when
// there is none) and stores it when change says so, retrying once when
// another instance wrote it at the same time.
func (s *Store) updateUser(ctx context.Context, id string, change func(*User) bool) error {
	if !s.ready.Load() {
		return ErrNotReady
	}
	for try := 0; ; try++ {
		r := new(User)
		data, err := s.loadRecord(ctx, kindUsers, id, r)
		if errors.Is(err, ErrNotFound) {
			r, data, err = new(User), nil, nil
		}
		if err != nil {
			return err
		}
		if !change(r) {
			s.mu.Lock()
			if data != nil {
				err = s.put(s.idx, kindUsers, data, true)
			}
			s.mu.Unlock()
			return err
		}
		r.Version++
		r.UpdatedAt = s.now()
		err = s.swap(ctx, kindUsers, id, data, r)
		if !errors.Is(err, ErrVersionConflict) || try > 0 {
			return err
		}
	}
}

// UserRecord returns the user record id.
func (s *Store) UserRecord(id string) (*User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.idx.users.byID[id]
	return r, ok
}

// UserCaller returns the caller of the active user named name (its
// identity.UserPrefix name) in workspace ws: what a token user's managed
// or native batch runs as. false when there is none or it is disabled.
func (s *Store) UserCaller(name, ws string) (*identity.Caller, bool) {
	s.mu.RLock()
	r := s.idx.users.byName[name]
	s.mu.RUnlock()
	if r == nil || r.Status != UserActive || r.WorkspaceID != ws {
		return nil, false
	}
	c := &identity.Caller{KeyID: r.ID, Name: r.Name, Source: identity.SourceOIDC, Type: r.Type,
		WorkspaceID: r.WorkspaceID, OrganisationID: r.OrganisationID, Scopes: r.Scopes, AllowedModels: r.AllowedModels}
	if !r.Defaults.IsZero() {
		d := *r.Defaults
		c.Defaults = &d
	}
	return c, true
}

// Users returns the user records keep accepts, by name.
func (s *Store) Users(keep func(*User) bool) []*User {
	s.mu.RLock()
	out := make([]*User, 0, len(s.idx.users.byID))
	for _, r := range s.idx.users.byID {
		if keep(r) {
			out = append(out, r)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *User) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
