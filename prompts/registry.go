package prompts

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Options configure a Registry. The zero value is usable (an in-memory
// store, no target checks).
type Options struct {
	// Store keeps API-created prompts; nil means a new MemoryStore.
	Store Store
	// CheckTarget, when set, validates the provider a version names
	// (a known virtual key, saved config or provider slug). It runs on
	// file prompts at load and on every version created through the API.
	CheckTarget func(*Target) error
	// CacheTTL bounds how long another instance's writes take to be seen
	// here (default 5s).
	CacheTTL time.Duration
	// Now replaces time.Now in tests.
	Now func() time.Time
	// OnStoreError is told about every store failure: clients get a 503
	// without the error's text, which may name internal paths or hosts.
	// A failed reload keeps the previous snapshot in service.
	OnStoreError func(error)
}

// Registry is every prompt the gateway knows: the read-only prompts of the
// prompt files, and those created through the API, kept in a Store and
// served from an in-process snapshot. It is safe for concurrent use.
type Registry struct {
	files []*Prompt
	store Store
	opts  Options
	cache snapshotCache
}

// NewRegistry returns a registry over file prompts (from LoadDir) and a
// store. It fails when two files give the same id, or the same slug to
// workspaces that would both see them, or when CheckTarget rejects a file
// version.
func NewRegistry(files []*Prompt, opts Options) (*Registry, error) {
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for i, p := range files {
		for j, v := range p.Versions {
			if opts.CheckTarget == nil || v.Target.IsZero() {
				continue
			}
			if err := opts.CheckTarget(&v.Target); err != nil {
				return nil, fmt.Errorf("prompt file %s: versions[%d]: %v", p.File, j, err)
			}
		}
		for _, q := range files[:i] {
			if q.ID == p.ID {
				return nil, fmt.Errorf("prompt files %s and %s have the same id %s", q.File, p.File, p.ID)
			}
			if q.Slug == p.Slug && (q.WorkspaceID == "" || p.WorkspaceID == "" || q.WorkspaceID == p.WorkspaceID) {
				return nil, fmt.Errorf("prompt files %s and %s have the same slug %q", q.File, p.File, p.Slug)
			}
		}
	}
	r := &Registry{files: files, store: opts.Store, opts: opts}
	r.cache = snapshotCache{ttl: opts.CacheTTL, now: opts.Now, load: opts.Store.Load, onErr: opts.OnStoreError}
	return r, nil
}

// Files returns the file prompts, shared: never modify them.
func (r *Registry) Files() []*Prompt { return r.files }

// Lookup returns the prompt a workspace knows by id or slug: a file prompt
// first (operators' files win over API prompts of the same slug; the API
// prompt stays reachable by its id), then the workspace's API prompts.
func (r *Registry) Lookup(ctx context.Context, workspaceID, idOrSlug string) (*Prompt, error) {
	stored, err := r.cache.get(ctx)
	if err != nil {
		return nil, r.unavailable(err)
	}
	if p := find(r.files, stored, workspaceID, idOrSlug); p != nil {
		return p, nil
	}
	return nil, notFound(idOrSlug)
}

// find returns the prompt ref names for a workspace: a file prompt it sees
// (files without a workspace are shared) or an API prompt of exactly that
// workspace. An API prompt always belongs to one workspace; a record
// without one is reachable by nobody.
func find(files, stored []*Prompt, workspaceID, ref string) *Prompt {
	for _, byID := range []bool{true, false} {
		for i, set := range [][]*Prompt{files, stored} {
			for _, p := range set {
				visible := p.visibleTo(workspaceID)
				if i == 1 {
					visible = p.WorkspaceID != "" && p.WorkspaceID == workspaceID
				}
				if visible && ((byID && p.ID == ref) || (!byID && p.Slug == ref)) {
					return p
				}
			}
		}
	}
	return nil
}

// List returns the prompts a workspace sees: file prompts by slug, then
// API prompts oldest first.
func (r *Registry) List(ctx context.Context, workspaceID string) ([]*Prompt, error) {
	stored, err := r.cache.get(ctx)
	if err != nil {
		return nil, r.unavailable(err)
	}
	var out []*Prompt
	for _, p := range r.files {
		if p.visibleTo(workspaceID) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *Prompt) int { return cmp.Compare(a.Slug, b.Slug) })
	n := len(out)
	for _, p := range stored {
		if p.WorkspaceID != "" && p.WorkspaceID == workspaceID {
			out = append(out, p)
		}
	}
	slices.SortFunc(out[n:], func(a, b *Prompt) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// NewPrompt is what creating a prompt takes.
type NewPrompt struct {
	Name         string
	CollectionID string
	// Version is the first version; the registry sets its id, number and
	// creation time. It is published.
	Version *Version
}

// Create stores a new prompt in a workspace. Its slug comes from its name,
// with "-2", "-3", … appended when the workspace already sees that slug.
func (r *Registry) Create(ctx context.Context, workspaceID string, in NewPrompt) (*Prompt, error) {
	if strings.TrimSpace(in.Name) == "" {
		return nil, apierror.BadRequest("name", "name is required")
	}
	now := r.now()
	v := in.Version
	v.ID, v.Number, v.CreatedAt = uuid.NewString(), 1, now
	if err := r.checkVersion(v); err != nil {
		return nil, err
	}
	// A UUIDv7 rises with every id made in this process, within a
	// millisecond too: prompts created in the same millisecond (their
	// CreatedAt) still list in the order they were made (List).
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	p := &Prompt{
		ID: id.String(), Name: in.Name, CollectionID: in.CollectionID, WorkspaceID: workspaceID,
		Published: 1, Versions: []*Version{v}, CreatedAt: now, LastUpdatedAt: now,
	}
	err = r.mutate(ctx, func(all []*Prompt) ([]*Prompt, []string, error) {
		p.Slug = r.freeSlug(all, workspaceID, in.Name)
		return []*Prompt{p}, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (r *Registry) freeSlug(stored []*Prompt, workspaceID, name string) string {
	base := Slugify(name)
	if base == "" {
		base = "prompt"
	}
	taken := func(s string) bool {
		for _, set := range [][]*Prompt{r.files, stored} {
			for _, p := range set {
				if p.Slug == s && (p.WorkspaceID == "" || p.WorkspaceID == workspaceID) {
					return true
				}
			}
		}
		return false
	}
	slug := base
	for n := 2; taken(slug); n++ {
		slug = base + "-" + strconv.Itoa(n)
	}
	return slug
}

// Update is what updating a prompt takes; nil fields are left alone.
type Update struct {
	Name         *string
	CollectionID *string
	// NewVersion, when set, builds a new version from a copy of the latest
	// one (it runs under the store's lock, so the copy is current). The
	// new version is appended and not published.
	NewVersion func(latest Version) (*Version, error)
}

// Update changes a prompt's name or collection and may add a version. It
// returns the prompt and the version added, or nil when none was.
func (r *Registry) Update(ctx context.Context, workspaceID, ref string, u Update) (*Prompt, *Version, error) {
	var added *Version
	p, err := r.edit(ctx, workspaceID, ref, func(p *Prompt) error {
		if u.Name != nil {
			if strings.TrimSpace(*u.Name) == "" {
				return apierror.BadRequest("name", "name must not be empty")
			}
			p.Name = *u.Name
		}
		if u.CollectionID != nil {
			p.CollectionID = *u.CollectionID
		}
		if u.NewVersion == nil {
			return nil
		}
		latest := *p.Latest()
		latest.compiled = nil
		latest.Hyperparameters = maps.Clone(latest.Hyperparameters)
		latest.ProviderSettings = maps.Clone(latest.ProviderSettings)
		latest.Messages = slices.Clone(latest.Messages)
		v, err := u.NewVersion(latest)
		if err != nil {
			return err
		}
		v.ID, v.Number, v.CreatedAt = uuid.NewString(), len(p.Versions)+1, r.now()
		if err := r.checkVersion(v); err != nil {
			return err
		}
		p.Versions = append(p.Versions, v)
		added = v
		return nil
	})
	return p, added, err
}

// Publish makes version n the one a bare prompt id resolves to.
func (r *Registry) Publish(ctx context.Context, workspaceID, ref string, n int) (*Prompt, error) {
	return r.edit(ctx, workspaceID, ref, func(p *Prompt) error {
		if p.Version(n) == nil {
			return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "prompt %q has no version %d (it has %d)", p.Slug, n, len(p.Versions)).WithCode("prompt_version_not_found")
		}
		p.Published = n
		return nil
	})
}

// VersionMeta is what may change on an existing version; nil fields are
// left alone. The template, model, provider and hyperparameters of a
// version never change.
type VersionMeta struct {
	Description      *string
	TemplateMetadata json.RawMessage
	LabelID          *string
}

// UpdateVersion changes a version's description, metadata or label.
// versionRef is the version's id or its number.
func (r *Registry) UpdateVersion(ctx context.Context, workspaceID, ref, versionRef string, m VersionMeta) (*Prompt, *Version, error) {
	if len(m.TemplateMetadata) > 0 && !isJSONObject(m.TemplateMetadata) {
		return nil, nil, apierror.BadRequest("template_metadata", "template_metadata must be a JSON object")
	}
	var out *Version
	p, err := r.edit(ctx, workspaceID, ref, func(p *Prompt) error {
		v, err := FindVersion(p, versionRef)
		if err != nil {
			return err
		}
		c := *v
		if m.Description != nil {
			c.Description = *m.Description
		}
		if len(m.TemplateMetadata) > 0 {
			c.TemplateMetadata = m.TemplateMetadata
		}
		if m.LabelID != nil {
			c.LabelID = *m.LabelID
		}
		p.Versions[v.Number-1] = &c
		out = &c
		return nil
	})
	return p, out, err
}

// Delete removes an API prompt and all its versions.
func (r *Registry) Delete(ctx context.Context, workspaceID, ref string) error {
	if err := r.refuseFile(workspaceID, ref); err != nil {
		return err
	}
	return r.mutate(ctx, func(all []*Prompt) ([]*Prompt, []string, error) {
		p := find(nil, all, workspaceID, ref)
		if p == nil || p.WorkspaceID != workspaceID {
			return nil, nil, notFound(ref)
		}
		return nil, []string{p.ID}, nil
	})
}

// FindVersion returns a prompt's version by id or number.
func FindVersion(p *Prompt, versionRef string) (*Version, error) {
	for _, v := range p.Versions {
		if v.ID == versionRef {
			return v, nil
		}
	}
	if n, err := strconv.Atoi(versionRef); err == nil && p.Version(n) != nil {
		return p.Version(n), nil
	}
	return nil, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "prompt %q has no version %q", p.Slug, versionRef).WithCode("prompt_version_not_found")
}

// edit applies fn to a copy of an API prompt under the store's lock and
// stores it.
func (r *Registry) edit(ctx context.Context, workspaceID, ref string, fn func(*Prompt) error) (*Prompt, error) {
	if err := r.refuseFile(workspaceID, ref); err != nil {
		return nil, err
	}
	var out *Prompt
	err := r.mutate(ctx, func(all []*Prompt) ([]*Prompt, []string, error) {
		cur := find(nil, all, workspaceID, ref)
		if cur == nil || cur.WorkspaceID != workspaceID {
			return nil, nil, notFound(ref)
		}
		p := cur.clone()
		if err := fn(p); err != nil {
			return nil, nil, err
		}
		p.LastUpdatedAt = r.now()
		out = p
		return []*Prompt{p}, nil, nil
	})
	return out, err
}

// refuseFile answers a write to a file prompt with a 409: the file is the
// source of truth, and an API change would be lost on the next reload.
func (r *Registry) refuseFile(workspaceID, ref string) error {
	if p := find(r.files, nil, workspaceID, ref); p != nil {
		return apierror.Newf(http.StatusConflict, apierror.TypeInvalidRequest,
			"prompt %q is defined in the prompt file %s and is read-only through the API: edit the file and reload the gateway's config", p.Slug, p.File).WithCode("prompt_read_only")
	}
	return nil
}

func (r *Registry) mutate(ctx context.Context, fn func([]*Prompt) ([]*Prompt, []string, error)) error {
	err := r.store.Mutate(ctx, fn)
	r.cache.invalidate()
	if err == nil {
		return nil
	}
	if _, ok := err.(*apierror.Error); ok {
		return err
	}
	return r.unavailable(err)
}

// checkVersion validates a version made through the API.
func (r *Registry) checkVersion(v *Version) error {
	if err := v.validate(""); err != nil {
		if fe, ok := err.(*FieldError); ok {
			return apierror.BadRequest(fe.Field, "%s", fe.Error())
		}
		return apierror.BadRequest("", "%v", err)
	}
	if r.opts.CheckTarget != nil && !v.Target.IsZero() {
		if err := r.opts.CheckTarget(&v.Target); err != nil {
			return apierror.BadRequest("virtual_key", "%v", err)
		}
	}
	return nil
}

func (r *Registry) now() time.Time { return r.opts.Now().UTC().Truncate(time.Millisecond) }

func notFound(ref string) *apierror.Error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "prompt %q not found", ref).WithCode("prompt_not_found")
}

// unavailable reports a store error to OnStoreError and answers a 503.
func (r *Registry) unavailable(err error) *apierror.Error {
	if r.opts.OnStoreError != nil {
		r.opts.OnStoreError(err)
	}
	return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the prompt store is unavailable")
}
