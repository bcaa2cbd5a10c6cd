package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// MaxSearch is the longest search text SearchAPIKeys is given by the
// API (longer ones are refused there, not cut).
const MaxSearch = 128

// keyRef is one API key in id order: the record, and its name in lower
// case so a search compares names without folding a million of them on
// every page.
type keyRef struct {
	id, lname string
	rec       *APIKey
}

func byID(r keyRef, id string) int { return strings.Compare(r.id, id) }

// scope is one cut of the key order: an organisation's keys (ws empty),
// those of one of its workspaces, or (wsKeys) that workspace's workspace
// keys alone, what a workspace key lists.
type scope struct {
	org, ws string
	wsKeys  bool
}

// scopesOf are the scopes key r is listed in.
func scopesOf(r *APIKey) []scope {
	out := []scope{{r.OrganisationID, "", false}, {r.OrganisationID, r.WorkspaceID, false}}
	if r.Type != TypeOrganisation {
		out = append(out, scope{r.OrganisationID, r.WorkspaceID, true})
	}
	return out
}

// putRef puts ref in its place in order (by id), replacing the ref of
// the same id.
func putRef(order []keyRef, ref keyRef) []keyRef {
	i, found := slices.BinarySearchFunc(order, ref.id, byID)
	if found {
		order[i] = ref
		return order
	}
	return slices.Insert(order, i, ref)
}

// dropRef removes id from order.
func dropRef(order []keyRef, id string) []keyRef {
	if i, ok := slices.BinarySearchFunc(order, id, byID); ok {
		return slices.Delete(order, i, i+1)
	}
	return order
}

// unscope removes key old from its scopes' orders.
func (idx *index) unscope(old *APIKey) {
	for _, k := range scopesOf(old) {
		if o := dropRef(idx.scoped[k], old.ID); len(o) > 0 {
			idx.scoped[k] = o
		} else {
			delete(idx.scoped, k)
		}
	}
}

// holds counts n more records of organisation org in workspace ws.
func (idx *index) holds(ws, org string, n int) {
	m := idx.wsOrgs[ws]
	if m == nil {
		if n <= 0 {
			return
		}
		m = map[string]int{}
		idx.wsOrgs[ws] = m
	}
	if m[org] += n; m[org] <= 0 {
		delete(m, org)
		if len(m) == 0 {
			delete(idx.wsOrgs, ws)
		}
	}
}

// ForeignOrganisation returns an organisation other than own that holds
// records (API keys, virtual keys, configs) in workspace ws, the one
// with the smallest id when several do; ok is false when none does. It
// is one map read whatever the number of records: the counts are kept
// as records are indexed, on every instance from the same stored
// records.
func (s *Store) ForeignOrganisation(ws, own string) (org string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for o := range s.idx.wsOrgs[ws] {
		if o != own && (!ok || o < org) {
			org, ok = o, true
		}
	}
	return org, ok
}

// sortOrder builds the id order and its scopes from the records, after
// a full load or a bulk import (one sort instead of an insertion per
// record).
func (idx *index) sortOrder() {
	order := make([]keyRef, 0, len(idx.apiKeys))
	for id, r := range idx.apiKeys {
		order = append(order, keyRef{id: id, lname: strings.ToLower(r.Name), rec: r})
	}
	slices.SortFunc(order, func(a, b keyRef) int { return strings.Compare(a.id, b.id) })
	idx.order = order
	idx.scoped = map[scope][]keyRef{}
	for _, ref := range order {
		for _, k := range scopesOf(ref.rec) {
			idx.scoped[k] = append(idx.scoped[k], ref)
		}
	}
}

// KeyFilter selects the key records of a listing.
type KeyFilter struct {
	// Keep, when set, passes the records the caller may see.
	Keep func(*APIKey) bool
	// Search, when set, keeps the records whose name contains it,
	// ignoring case, or whose id starts with it.
	Search string
	// Status, when set, keeps the records with that status.
	Status string
	// Organisation, when set, keeps that organisation's records, and
	// Workspace, when set too, those of that workspace of it: the list
	// reads only that scope's keys.
	Organisation, Workspace string
	// NoOrgKeys leaves organisation keys out (a workspace key's list).
	NoOrgKeys bool
}

// ListAPIKeys returns up to limit key records that keep passes, in
// creation order, after the id after (empty: from the start) and then
// skipping offset of them, the number that pass in all, and whether more
// follow.
func (s *Store) ListAPIKeys(keep func(*APIKey) bool, after string, offset, limit int) (page []*APIKey, total int, more bool) {
	return s.SearchAPIKeys(KeyFilter{Keep: keep}, after, offset, limit)
}

// SearchAPIKeys is ListAPIKeys over the records f selects. It reads the
// id order of f's scope (an organisation's keys, a workspace's, or its
// workspace keys alone; all keys without f.Organisation). A list that
// keeps every key of its scope (no search, status or Keep) is a binary search for the
// cursor and a slice of the page, whatever the number of keys: the total
// is the scope's length. Any other is one scan of the scope, since the
// total the API answers needs every match counted; what keeps that scan
// fast at a million keys is that it reads a contiguous slice of ids and
// lower-cased names, and touches a record only when its name or id
// matches (or there is no search).
func (s *Store) SearchAPIKeys(f KeyFilter, after string, offset, limit int) (page []*APIKey, total int, more bool) {
	q := strings.ToLower(f.Search)
	s.mu.RLock()
	defer s.mu.RUnlock()
	order := s.idx.order
	noOrgKeys := f.NoOrgKeys
	if f.Organisation != "" {
		wsKeys := noOrgKeys && f.Workspace != ""
		order = s.idx.scoped[scope{f.Organisation, f.Workspace, wsKeys}]
		noOrgKeys = noOrgKeys && !wsKeys
	}
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(order, after, byID)
		if start < len(order) && order[start].id == after {
			start++
		}
	}
	if q == "" && f.Status == "" && f.Keep == nil && !noOrgKeys {
		from := min(start+max(offset, 0), len(order))
		to := min(from+max(limit, 0), len(order))
		for _, ref := range order[from:to] {
			page = append(page, ref.rec)
		}
		return page, len(order), to < len(order)
	}
	for i := range order {
		ref := &order[i]
		if q != "" && !strings.Contains(ref.lname, q) && !strings.HasPrefix(ref.id, q) {
			continue
		}
		r := ref.rec
		if f.Status != "" && r.Status != f.Status || noOrgKeys && r.Type == TypeOrganisation || f.Keep != nil && !f.Keep(r) {
			continue
		}
		total++
		if i < start {
			continue
		}
		if offset > 0 {
			offset--
			continue
		}
		if len(page) < limit {
			page = append(page, r)
		} else {
			more = true
		}
	}
	return page, total, more
}

// ImportAPIKeys stores key records made elsewhere (a migration from
// another gateway, a benchmark's million keys) in one pass: each record
// is written to the KV, workers at a time, then all are indexed under
// one lock with one sort, and announced once, so other instances read
// everything again once instead of once per record. Each record needs a
// UUID id not in use and Digest, the digest of its key under this
// store's secret (Hasher().Sum); status and times default as
// CreateAPIKey's do. A failure may leave some records stored but not yet
// served here; Load serves them.
func (s *Store) ImportAPIKeys(ctx context.Context, recs []*APIKey, workers int) error {
	if s.Hasher() == nil || !s.Ready() {
		return ErrNotReady
	}
	now := s.now()
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		if uuid.Validate(r.ID) != nil || seen[r.ID] {
			return fmt.Errorf("keys: import: id %q is not a UUID or is given twice", r.ID)
		}
		seen[r.ID] = true
		if err := checkKeyName(r.Name); err != nil {
			return fmt.Errorf("keys: import: key %s: %w", r.ID, err)
		}
		if _, err := ParseDigest(r.Digest); err != nil {
			return fmt.Errorf("keys: import: key %s has no digest", r.ID)
		}
		if _, taken := s.APIKey(r.ID); taken {
			return fmt.Errorf("keys: import: key %s exists", r.ID)
		}
		if r.Status == "" {
			r.Status = StatusActive
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now
		}
		if r.UpdatedAt.IsZero() {
			r.UpdatedAt = r.CreatedAt
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	for _, r := range recs {
		g.Go(func() error {
			data, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := s.opts.KV.Store(gctx, s.recordKey(kindAPIKeys, r.ID), data); err != nil {
				return fmt.Errorf("keys: storing api key %s: %w", r.ID, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var errs []error
	s.mu.Lock()
	for _, r := range recs {
		errs = append(errs, s.idx.putAPIKey(r, false))
	}
	s.idx.sortOrder()
	s.mu.Unlock()
	s.announce(ctx, kindAPIKeys, "*")
	return errors.Join(errs...)
}
