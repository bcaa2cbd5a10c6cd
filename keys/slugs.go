package keys

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// A slug names one record in its workspace. Two instances creating the
// same slug at once each see it free in memory, so the name is claimed in
// the KV first: a claim key per (kind, workspace, slug) holding the id of
// the record that owns it, created with a compare-and-set from nothing,
// so of two creates exactly one claims it and the other is ErrConflict.
// The claim is released when its record is deleted.
//
// A claim can outlive its record (a create that failed after claiming, a
// release that failed after the delete): a claim whose record does not
// exist is taken over, but only once its id (a UUIDv7, so a time) is
// older than claimStale, so a create between its claim and its record's
// write is never taken over.
const claimStale = time.Minute

// slugKey is the claim key of slug in workspace ws for records of kind.
// Claims live beside the records' folders, never listed as records.
func (s *Store) slugKey(kind, ws, slug string) string {
	return s.prefix + "/slugs/" + kind + "/" + ws + "/" + slug
}

// claimSlug claims slug in ws for record id of kind, or reports false
// when a live record owns it.
func (s *Store) claimSlug(ctx context.Context, kind, ws, slug, id string) (bool, error) {
	key := s.slugKey(kind, ws, slug)
	ok, err := kvstore.CompareAndSwap(ctx, s.opts.KV, key, nil, []byte(id))
	if ok || err != nil {
		return ok, err
	}
	holder, err := s.opts.KV.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		// Released in between: claim again, once.
		return kvstore.CompareAndSwap(ctx, s.opts.KV, key, nil, []byte(id))
	}
	if err != nil {
		return false, err
	}
	if !s.staleClaim(ctx, kind, string(holder)) {
		return false, nil
	}
	return kvstore.CompareAndSwap(ctx, s.opts.KV, key, holder, []byte(id))
}

// staleClaim reports whether a claim held by id names no record and was
// made more than claimStale ago.
func (s *Store) staleClaim(ctx context.Context, kind, id string) bool {
	u, err := uuid.Parse(id)
	if err != nil {
		return true // not a claim this store wrote
	}
	sec, nsec := u.Time().UnixTime()
	if s.now().Sub(time.Unix(sec, nsec)) < claimStale {
		return false
	}
	_, err = s.opts.KV.Load(ctx, s.recordKey(kind, id))
	return errors.Is(err, fs.ErrNotExist)
}

// releaseSlug drops record id's claim of slug in ws (only its own: one
// taken over meanwhile stays).
func (s *Store) releaseSlug(ctx context.Context, kind, ws, slug, id string) error {
	if _, err := kvstore.CompareAndDelete(ctx, s.opts.KV, s.slugKey(kind, ws, slug), []byte(id)); err != nil {
		return fmt.Errorf("keys: releasing the slug %s: %w", slug, err)
	}
	return nil
}
