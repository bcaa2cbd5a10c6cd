package keys

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// countingKV counts the user records stored (not the change counter).
type countingKV struct {
	kvstore.KV
	stores atomic.Int64
}

func (c *countingKV) Store(ctx context.Context, key string, value []byte) error {
	if strings.Contains(key, "/"+kindUsers+"/") {
		c.stores.Add(1)
	}
	return c.KV.Store(ctx, key, value)
}

func tokenUser(sub, ws string, scopes ...string) *identity.Caller {
	return &identity.Caller{KeyID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(sub)).String(), Name: identity.UserPrefix + sub,
		Source: identity.SourceOIDC, Type: identity.TypeWorkspace, WorkspaceID: ws, OrganisationID: "org", Scopes: scopes}
}

// TestUserRecords: a token user is recorded on first sight, seen again
// with the same mapping it writes nothing, a changed mapping rewrites it,
// a disabled user has no caller until the IdP admits it again, another
// instance (or this one restarted) reads the record, the bound holds, and
// a gateway key is never recorded as a user.
func TestUserRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kv := &countingKV{KV: &certmagic.FileStorage{Path: dir}}
	s := newStoreWith(t, kv, func(*Options) {})
	alice := tokenUser("alice", "ws1", "completions.write")
	base := kv.stores.Load()
	steps := []struct {
		name   string
		do     func() error
		writes int64
		caller bool // UserCaller("user:alice", "ws1") finds her
		status string
	}{
		{"first sight", func() error { return s.SeeUser(ctx, alice) }, 1, true, UserActive},
		{"same mapping", func() error { return s.SeeUser(ctx, tokenUser("alice", "ws1", "completions.write")) }, 0, true, UserActive},
		{"scopes changed", func() error { return s.SeeUser(ctx, tokenUser("alice", "ws1", "completions.write", "logs.view")) }, 1, true, UserActive},
		{"disabled", func() error { return s.DisableUser(ctx, alice.KeyID, "token_not_allowed") }, 1, false, UserDisabled},
		{"disabled again", func() error { return s.DisableUser(ctx, alice.KeyID, "token_not_allowed") }, 0, false, UserDisabled},
		{"admitted again", func() error { return s.SeeUser(ctx, alice) }, 1, true, UserActive},
		{"moved workspace", func() error { return s.SeeUser(ctx, tokenUser("alice", "ws2", "completions.write")) }, 1, false, UserActive},
		{"back", func() error { return s.SeeUser(ctx, alice) }, 1, true, UserActive},
		{"a gateway key", func() error {
			return s.SeeUser(ctx, &identity.Caller{KeyID: NewID(), Name: "svc", Source: SourceAPI, WorkspaceID: "ws1"})
		}, 0, true, UserActive},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := kv.stores.Load() - base; got != st.writes {
			t.Errorf("%s: %d writes, want %d", st.name, got, st.writes)
		}
		base = kv.stores.Load()
		if _, ok := s.UserCaller("user:alice", "ws1"); ok != st.caller {
			t.Errorf("%s: caller found %v, want %v", st.name, ok, st.caller)
		}
		if r, ok := s.UserRecord(alice.KeyID); !ok || r.Status != st.status {
			t.Errorf("%s: record %+v, want status %s", st.name, r, st.status)
		}
	}
	if got := s.Users(func(*User) bool { return true }); len(got) != 1 || got[0].Name != "user:alice" {
		t.Fatalf("users %+v", got)
	}
	// Another instance, or this one after a restart, reads the record.
	other := newTestStore(t, &certmagic.FileStorage{Path: dir}, nil)
	c, ok := other.UserCaller("user:alice", "ws1")
	if !ok || c.KeyID != alice.KeyID || c.Source != identity.SourceOIDC || len(c.Scopes) != 1 {
		t.Fatalf("restarted: %+v %v", c, ok)
	}
	// The bound: a new user past it is not recorded; known ones still are.
	defer func(n int) { MaxUsers = n }(MaxUsers)
	MaxUsers = 1
	if err := s.SeeUser(ctx, tokenUser("bob", "ws1")); !errors.Is(err, ErrTooManyUsers) {
		t.Fatalf("past the bound: %v", err)
	}
	if err := s.SeeUser(ctx, tokenUser("alice", "ws1")); err != nil {
		t.Fatalf("a known user past the bound: %v", err)
	}
}
