package prompts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

const (
	wsA = "00000000-0000-4000-8000-00000000000a"
	wsB = "00000000-0000-4000-8000-00000000000b"
)

func newVersion(content string) *Version {
	return &Version{Messages: []Message{{Role: "user", Content: mustMarshal(content)}}, Model: "m",
		Hyperparameters: map[string]json.RawMessage{"temperature": json.RawMessage("0.5")}}
}

func wantStatus(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != status || (code != "" && ae.Code != code) {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
}

func TestRegistryWrites(t *testing.T) {
	ctx := context.Background()
	file := testPrompt(t, "shared", 1, "file")
	reg, err := NewRegistry([]*Prompt{file}, Options{CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	p, err := reg.Create(ctx, wsA, NewPrompt{Name: "Shared", Version: newVersion("a {{x}}")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Slug != "shared-2" || p.Published != 1 || p.Versions[0].Number != 1 {
		t.Fatalf("created %+v (the file prompt's slug is taken in every workspace)", p)
	}
	// The write is visible at once despite the hour-long cache.
	if got, err := reg.Lookup(ctx, wsA, "shared-2"); err != nil || got.ID != p.ID {
		t.Fatalf("lookup after create: %v", err)
	}
	_, err = reg.Lookup(ctx, wsB, p.ID)
	wantStatus(t, err, 404, "prompt_not_found")

	// Update: a new version from the latest, unpublished; the template
	// fields not given are kept.
	_, added, err := reg.Update(ctx, wsA, p.ID, Update{NewVersion: func(latest Version) (*Version, error) {
		latest.Messages = []Message{{Role: "user", Content: mustMarshal("b {{x}}")}}
		return &latest, nil
	}})
	if err != nil || added.Number != 2 || added.Model != "m" || string(added.Hyperparameters["temperature"]) != "0.5" {
		t.Fatalf("update: %+v %v", added, err)
	}
	got, _ := reg.Lookup(ctx, wsA, p.ID)
	if got.Published != 1 || len(got.Versions) != 2 {
		t.Fatalf("after update %+v", got)
	}
	// An invalid new version is refused and nothing is stored.
	_, _, err = reg.Update(ctx, wsA, p.ID, Update{NewVersion: func(latest Version) (*Version, error) {
		latest.Messages = []Message{{Role: "user", Content: mustMarshal("{{#open}}")}}
		return &latest, nil
	}})
	wantStatus(t, err, 400, "")
	if got, _ := reg.Lookup(ctx, wsA, p.ID); len(got.Versions) != 2 {
		t.Fatal("a refused version was stored")
	}

	if _, err := reg.Publish(ctx, wsA, "shared-2", 2); err != nil {
		t.Fatal(err)
	}
	_, err = reg.Publish(ctx, wsA, "shared-2", 3)
	wantStatus(t, err, 404, "prompt_version_not_found")

	desc := "described"
	_, v, err := reg.UpdateVersion(ctx, wsA, "shared-2", "1", VersionMeta{Description: &desc, TemplateMetadata: json.RawMessage(`{"k":"v"}`)})
	if err != nil || v.Description != desc || string(v.TemplateMetadata) != `{"k":"v"}` || !strings.Contains(string(v.Messages[0].Content), "a {{x}}") {
		t.Fatalf("update version: %+v %v", v, err)
	}
	_, _, err = reg.UpdateVersion(ctx, wsA, "shared-2", "1", VersionMeta{TemplateMetadata: json.RawMessage(`[1]`)})
	wantStatus(t, err, 400, "")

	// File prompts are read-only; other workspaces cannot touch API prompts.
	_, _, err = reg.Update(ctx, wsA, "shared", Update{})
	wantStatus(t, err, 409, "prompt_read_only")
	wantStatus(t, reg.Delete(ctx, wsA, file.ID), 409, "prompt_read_only")
	wantStatus(t, reg.Delete(ctx, wsB, p.ID), 404, "prompt_not_found")

	if err := reg.Delete(ctx, wsA, p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = reg.Lookup(ctx, wsA, p.ID)
	wantStatus(t, err, 404, "prompt_not_found")
}

func TestRegistryFileConflicts(t *testing.T) {
	a := testPrompt(t, "same", 1, "a")
	b := testPrompt(t, "same", 1, "b")
	b.ID, b.File = deriveID("other"), "b.json"
	if _, err := NewRegistry([]*Prompt{a, b}, Options{}); err == nil || !strings.Contains(err.Error(), "same slug") {
		t.Fatalf("duplicate slug: %v", err)
	}
	// The same slug in two different workspaces is fine.
	a.WorkspaceID, b.WorkspaceID = wsA, wsB
	if _, err := NewRegistry([]*Prompt{a, b}, Options{}); err != nil {
		t.Fatal(err)
	}
	check := func(tg *Target) error { return errors.New("unknown virtual key") }
	a.Versions[0].VirtualKey = "vk"
	if _, err := NewRegistry([]*Prompt{a}, Options{CheckTarget: check}); err == nil || !strings.Contains(err.Error(), "same.json: versions[0]") {
		t.Fatalf("target check: %v", err)
	}
}

func TestStoreRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	reg, _ := NewRegistry(nil, Options{Store: store})
	p, err := reg.Create(ctx, wsA, NewPrompt{Name: "Round trip", CollectionID: "c", Version: newVersion("{{x}}")})
	if err != nil {
		t.Fatal(err)
	}
	// A second registry over the same store (another instance) sees it and
	// can render it: records are compiled when loaded.
	other, _ := NewRegistry(nil, Options{Store: store})
	got, v, err := Resolve(ctx, other, wsA, "round-trip")
	if err != nil || got.ID != p.ID || got.CollectionID != "c" {
		t.Fatalf("resolve from another registry: %v", err)
	}
	out, err := RenderRequest(got, v, []byte(`{"variables":{"x":"y"}}`))
	if err != nil || !strings.Contains(string(out), `"content":"y"`) {
		t.Fatalf("render %s %v", out, err)
	}
}

func TestSlugify(t *testing.T) {
	cases := map[string]string{
		"Support Reply":        "support-reply",
		"  Weekly -- Report! ": "weekly-report",
		"Überprüfung 2":        "berpr-fung-2",
		"a_b.c":                "a-b-c",
		"!!!":                  "",
	}
	for in, want := range cases {
		if got := Slugify(in); got != want {
			t.Errorf("Slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRegistryTenancy checks that an API prompt is reachable only from its
// own workspace, by id and by slug, for every operation, and that a stored
// record without a workspace is reachable by nobody (file prompts without
// one are the operator's, shared on purpose).
func TestRegistryTenancy(t *testing.T) {
	ctx := context.Background()
	reg, err := NewRegistry(nil, Options{CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, err := reg.Create(ctx, wsA, NewPrompt{Name: "Mine", Version: newVersion("a")})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := reg.Create(ctx, "", NewPrompt{Name: "Orphan", Version: newVersion("o")})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{p.ID, p.Slug, orphan.ID, orphan.Slug} {
		for name, op := range map[string]func() error{
			"lookup":  func() error { _, err := reg.Lookup(ctx, wsB, ref); return err },
			"update":  func() error { _, _, err := reg.Update(ctx, wsB, ref, Update{}); return err },
			"publish": func() error { _, err := reg.Publish(ctx, wsB, ref, 1); return err },
			"version": func() error { _, _, err := reg.UpdateVersion(ctx, wsB, ref, "1", VersionMeta{}); return err },
			"delete":  func() error { return reg.Delete(ctx, wsB, ref) },
		} {
			if err := op(); err == nil {
				t.Fatalf("%s of %s from another workspace succeeded", name, ref)
			}
		}
	}
	if _, err := reg.Lookup(ctx, wsA, orphan.ID); err == nil {
		t.Fatal("a prompt without a workspace is visible")
	}
	for _, ws := range []string{wsA, wsB} {
		list, err := reg.List(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range list {
			if q.WorkspaceID != ws {
				t.Fatalf("workspace %s lists %s of workspace %q", ws, q.ID, q.WorkspaceID)
			}
		}
	}
	if got, err := reg.Lookup(ctx, wsA, p.ID); err != nil || got.ID != p.ID {
		t.Fatalf("the owner lost its prompt: %v", err)
	}
}

// TestListKeepsCreationOrderWithinAMillisecond: prompts created in the
// same millisecond (one CreatedAt) list in the order they were made.
func TestListKeepsCreationOrderWithinAMillisecond(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reg, err := NewRegistry(nil, Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		p, err := reg.Create(ctx, wsA, NewPrompt{Name: fmt.Sprintf("p%d", i), Version: newVersion("a {{x}}")})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p.Slug)
	}
	list, err := reg.List(ctx, wsA)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range list {
		if p.Slug != want[i] {
			t.Fatalf("listed #%d is %s, want %s (creation order)", i, p.Slug, want[i])
		}
	}
}
