package keys

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// TestConfigAliases: a config's aliases route by it within its workspace
// only while it is active; another config of the workspace cannot take
// them (AliasTakenError on create and update); freed aliases can be taken.
func TestConfigAliases(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	body := json.RawMessage(`{"provider":"openai"}`)
	c1 := &Config{Slug: "c1", OrganisationID: "o", WorkspaceID: "ws", Aliases: []string{"x", "y"}}
	if err := s.CreateConfig(ctx, c1, body); err != nil {
		t.Fatal(err)
	}
	holder := func(ws, alias string) string {
		if r, ok := s.ConfigAlias(ws, alias); ok {
			return r.Slug
		}
		return ""
	}
	if holder("ws", "x") != "c1" || holder("ws", "y") != "c1" || holder("other", "x") != "" || holder("ws", "z") != "" {
		t.Fatalf("holders x=%q y=%q other/x=%q z=%q", holder("ws", "x"), holder("ws", "y"), holder("other", "x"), holder("ws", "z"))
	}
	var taken *AliasTakenError
	if err := s.CreateConfig(ctx, &Config{Slug: "c2", WorkspaceID: "ws", Aliases: []string{"y"}}, body); !errors.As(err, &taken) || taken.Alias != "y" || taken.Slug != "c1" {
		t.Fatalf("create with a taken alias: %v", err)
	}
	if err := s.CreateConfig(ctx, &Config{Slug: "c2", OrganisationID: "o", WorkspaceID: "other", Aliases: []string{"y"}}, body); err != nil {
		t.Fatalf("the same alias in another workspace: %v", err)
	}
	c3 := &Config{Slug: "c3", OrganisationID: "o", WorkspaceID: "ws"}
	if err := s.CreateConfig(ctx, c3, body); err != nil {
		t.Fatal(err)
	}
	set := func(id string, aliases ...string) error {
		_, err := s.UpdateConfig(ctx, id, nil, func(r *Config) error { r.Aliases = aliases; return nil })
		return err
	}
	if err := set(c3.ID, "z", "x"); !errors.As(err, &taken) || taken.Alias != "x" {
		t.Fatalf("update to a taken alias: %v", err)
	}
	if holder("ws", "z") != "" {
		t.Fatal("a refused update indexed its aliases")
	}
	if err := set(c1.ID, "y"); err != nil {
		t.Fatal(err)
	}
	if err := set(c3.ID, "z", "x"); err != nil {
		t.Fatalf("a freed alias: %v", err)
	}
	if holder("ws", "x") != "c3" || holder("ws", "y") != "c1" {
		t.Fatalf("after the move x=%q y=%q", holder("ws", "x"), holder("ws", "y"))
	}
	got := s.ConfigAliases("o", "ws")
	slices.Sort(got)
	if !slices.Equal(got, []string{"x", "y", "z"}) || len(s.ConfigAliases("p", "ws")) != 0 {
		t.Fatalf("aliases of ws: %v", got)
	}
	if _, err := s.UpdateConfig(ctx, c3.ID, nil, func(r *Config) error { r.Status = StatusDisabled; return nil }); err != nil {
		t.Fatal(err)
	}
	if holder("ws", "x") != "" || slices.Contains(s.ConfigAliases("o", "ws"), "x") {
		t.Fatal("a disabled config's alias still routes")
	}
	if err := s.DeleteConfig(ctx, c1.ID); err != nil {
		t.Fatal(err)
	}
	if holder("ws", "y") != "" {
		t.Fatal("a deleted config's alias still routes")
	}
}

// TestConfigAliasRace: when two instances let two configs take one alias
// at the same time, every index routes it by the older config, whatever
// order the records arrive in, and by the other once the older is gone.
func TestConfigAliasRace(t *testing.T) {
	older := &Config{ID: NewID(), Slug: "older", WorkspaceID: "ws", Status: StatusActive, Aliases: []string{"x"}}
	newer := &Config{ID: NewID(), Slug: "newer", WorkspaceID: "ws", Status: StatusActive, Aliases: []string{"x"}}
	for _, order := range [][]*Config{{older, newer}, {newer, older}} {
		idx := newIndex()
		for _, c := range order {
			idx.putConfig(c, c)
		}
		if e := idx.cfgAlias[wsName{"ws", "x"}]; e == nil || e.rec != older {
			t.Fatalf("order %s,%s: x is held by %v", order[0].Slug, order[1].Slug, e)
		}
		idx.putConfig(older, older) // a new version of the older one
		if e := idx.cfgAlias[wsName{"ws", "x"}]; e == nil || e.rec != older {
			t.Fatal("a rewrite of the holder lost the alias")
		}
		idx.dropConfig(older.ID)
		if e := idx.cfgAlias[wsName{"ws", "x"}]; e == nil || e.rec != newer {
			t.Fatalf("after the holder is gone x is held by %v", e)
		}
	}
}
