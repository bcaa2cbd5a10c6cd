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

// sortOrder builds the id order from the records, after a full load or a
// bulk import (one sort instead of an insertion per record).
func (idx *index) sortOrder() {
	order := make([]keyRef, 0, len(idx.apiKeys))
	for id, r := range idx.apiKeys {
		order = append(order, keyRef{id: id, lname: strings.ToLower(r.Name), rec: r})
	}
	slices.SortFunc(order, func(a, b keyRef) int { return strings.Compare(a.id, b.id) })
	idx.order = order
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
}

// ListAPIKeys returns up to limit key records that keep passes, in
// creation order, after the id after (empty: from the start) and then
// skipping offset of them, the number that pass in all, and whether more
// follow.
func (s *Store) ListAPIKeys(keep func(*APIKey) bool, after string, offset, limit int) (page []*APIKey, total int, more bool) {
	return s.SearchAPIKeys(KeyFilter{Keep: keep}, after, offset, limit)
}

// SearchAPIKeys is ListAPIKeys over the records f selects. It is one scan
// of the in-memory id order, whatever f: every record is in memory for
// Lookup already, and the total the API answers needs every match
// counted, so an index would not save the scan; what keeps the scan fast
// at a million keys is that it reads a contiguous slice of ids and
// lower-cased names, and touches a record only when its name or id
// matches (or there is no search).
func (s *Store) SearchAPIKeys(f KeyFilter, after string, offset, limit int) (page []*APIKey, total int, more bool) {
	q := strings.ToLower(f.Search)
	s.mu.RLock()
	defer s.mu.RUnlock()
	order := s.idx.order
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(order, after, byID)
		if start < len(order) && order[start].id == after {
			start++
		}
	}
	for i := range order {
		ref := &order[i]
		if q != "" && !strings.Contains(ref.lname, q) && !strings.HasPrefix(ref.id, q) {
			continue
		}
		r := ref.rec
		if f.Status != "" && r.Status != f.Status || f.Keep != nil && !f.Keep(r) {
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
