package responses

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// KV is the storage a Store keeps records in. certmagic.Storage (the
// storage a Caddy module gets from ctx.Storage()) satisfies it, and
// NewRedisKV adapts a Redis client. Load must return an error wrapping
// fs.ErrNotExist for a missing key.
type KV interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// StoreConfig configures a Store. The zero value is usable.
type StoreConfig struct {
	// Prefix is the key prefix (default "llm_gateway/responses").
	Prefix string
	// Retention is how long a record is served (default 30 days, as
	// OpenAI keeps responses). Older records are "not found".
	Retention time.Duration
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// DefaultRetention is OpenAI's retention of stored responses.
const DefaultRetention = 30 * 24 * time.Hour

// maxChain bounds how many stored turns previous_response_id replays, so
// a cycle or an endless chain cannot hold a request.
const maxChain = 1000

// Store keeps stored responses of translated targets, scoped to a
// workspace: a record is found only with the workspace it was saved
// under. It is safe for concurrent use as far as the KV is.
type Store struct {
	kv  KV
	cfg StoreConfig
}

// NewStore returns a store over kv.
func NewStore(kv KV, cfg StoreConfig) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "llm_gateway/responses"
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{kv: kv, cfg: cfg}
}

// Record is one stored response.
type Record struct {
	ID                 string `json:"id"`
	Workspace          string `json:"workspace"`
	CreatedAt          int64  `json:"created_at"`
	Model              string `json:"model"`
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	// Input is this turn's own input items (not the replayed history),
	// ids assigned. Instructions are not items and are not replayed.
	Input  []Item `json:"input"`
	Output []Item `json:"output"`
	// Response is the response object served by GET.
	Response json.RawMessage `json:"response"`
}

// RecordOf builds the record of a finished response for workspace.
func RecordOf(workspace string, r *Request, resp *Response) *Record {
	return &Record{
		ID: resp.ID, Workspace: workspace, CreatedAt: resp.CreatedAt, Model: resp.Model,
		PreviousResponseID: r.PreviousResponseID, Input: r.Input, Output: resp.Output, Response: resp.JSON(),
	}
}

// key maps (workspace, id) to a storage key; the workspace is hashed so
// any workspace string makes a safe path segment.
func (s *Store) key(workspace, id string) string {
	h := sha256.Sum256([]byte(workspace))
	return s.cfg.Prefix + "/" + hex.EncodeToString(h[:8]) + "/" + id + ".json"
}

// validID reports whether id has the shape of the ids this package
// makes, so arbitrary path segments never reach the storage.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// Save writes rec. Call it before the answer's last byte reaches the
// client, so a follow-up previous_response_id always finds it.
func (s *Store) Save(ctx context.Context, rec *Record) error {
	if !validID(rec.ID) {
		return fmt.Errorf("responses: refusing to store malformed id %q", rec.ID)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := s.kv.Store(ctx, s.key(rec.Workspace, rec.ID), data); err != nil {
		return fmt.Errorf("responses: storing %s: %w", rec.ID, err)
	}
	return nil
}

// errNotFound is the lookup failure Get, Delete and InputItems turn into
// a 404 and Chain into a 400.
var errNotFound = errors.New("not found")

func (s *Store) load(ctx context.Context, workspace, id string) (*Record, error) {
	if !validID(id) {
		return nil, errNotFound
	}
	data, err := s.kv.Load(ctx, s.key(workspace, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("responses: loading %s: %w", id, err)
	}
	if err := jsonlimit.Object(data); err != nil {
		return nil, fmt.Errorf("responses: record %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("responses: decoding %s: %w", id, err)
	}
	if rec.Workspace != workspace || rec.ID != id {
		return nil, errNotFound
	}
	if s.cfg.Now().Sub(time.Unix(rec.CreatedAt, 0)) > s.cfg.Retention {
		_ = s.kv.Delete(ctx, s.key(workspace, id)) // best effort
		return nil, errNotFound
	}
	return &rec, nil
}

func notFound(id string) *apierror.Error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeInvalidRequest, "No response found with id '%s'.", id).WithCode("not_found")
}

func storeFailure() *apierror.Error {
	return apierror.New(http.StatusInternalServerError, apierror.TypeServer, "the gateway could not read its response store")
}

func (s *Store) lookup(ctx context.Context, workspace, id string) (*Record, error) {
	rec, err := s.load(ctx, workspace, id)
	if errors.Is(err, errNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, storeFailure()
	}
	return rec, nil
}

// Get returns the record of id in workspace, or a 404 apierror.
func (s *Store) Get(ctx context.Context, workspace, id string) (*Record, error) {
	return s.lookup(ctx, workspace, id)
}

// Delete removes id from workspace and returns OpenAI's deletion body,
// or a 404 apierror.
func (s *Store) Delete(ctx context.Context, workspace, id string) ([]byte, error) {
	if _, err := s.lookup(ctx, workspace, id); err != nil {
		return nil, err
	}
	if err := s.kv.Delete(ctx, s.key(workspace, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, storeFailure()
	}
	return mustJSON(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response", true}), nil
}

// Chain returns the conversation previous_response_id replays: the input
// and output of every stored turn from the first to previousID, oldest
// first. An unknown, expired, unstored or other workspace's id is a 400,
// as OpenAI answers.
func (s *Store) Chain(ctx context.Context, workspace, previousID string) ([]Item, error) {
	var turns []*Record
	for id := previousID; id != ""; {
		if len(turns) == maxChain {
			return nil, apierror.BadRequest("previous_response_id", "The conversation of '%s' is longer than the gateway replays (%d responses).", previousID, maxChain)
		}
		rec, err := s.load(ctx, workspace, id)
		if errors.Is(err, errNotFound) {
			return nil, apierror.BadRequest("previous_response_id", "Previous response with id '%s' not found.", id).WithCode("previous_response_not_found")
		}
		if err != nil {
			return nil, storeFailure()
		}
		turns = append(turns, rec)
		id = rec.PreviousResponseID
	}
	var out []Item
	for i := len(turns) - 1; i >= 0; i-- {
		out = append(out, turns[i].Input...)
		out = append(out, turns[i].Output...)
	}
	return out, nil
}

// ResolveReferences replaces item_reference items by the stored items
// they name (ids made by ItemIDs name their response). An unresolvable
// reference is a 400.
func (s *Store) ResolveReferences(ctx context.Context, workspace string, items []Item) ([]Item, error) {
	var out []Item
	for i, it := range items {
		if !isReference(it) {
			if out != nil {
				out = append(out, it)
			}
			continue
		}
		if out == nil {
			out = append(make([]Item, 0, len(items)), items[:i]...)
		}
		id := itemID(it)
		found, err := s.findItem(ctx, workspace, id)
		if err != nil {
			return nil, err
		}
		out = append(out, found)
	}
	if out == nil {
		return items, nil
	}
	return out, nil
}

func (s *Store) findItem(ctx context.Context, workspace, id string) (Item, error) {
	missing := apierror.BadRequest("input", "Item with id '%s' not found.", id)
	respID := responseOfItem(id)
	if respID == "" {
		return nil, missing
	}
	rec, err := s.load(ctx, workspace, respID)
	if errors.Is(err, errNotFound) {
		return nil, missing
	}
	if err != nil {
		return nil, storeFailure()
	}
	for _, list := range [][]Item{rec.Input, rec.Output} {
		for _, it := range list {
			if itemID(it) == id {
				return it, nil
			}
		}
	}
	return nil, missing
}

// lister is the part of certmagic.Storage Sweep needs.
type lister interface {
	List(ctx context.Context, path string, recursive bool) ([]string, error)
}

// Sweep deletes the records older than the retention and returns how many
// it deleted. Lookups already hide expired records and Redis expires its
// keys itself; Sweep reclaims the space in Caddy storage, which has no
// expiry, and is meant to run now and then (e.g. daily). It does nothing
// for a KV that cannot list its keys.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	l, ok := s.kv.(lister)
	if !ok {
		return 0, nil
	}
	keys, err := l.List(ctx, s.cfg.Prefix, true)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("responses: listing %s: %w", s.cfg.Prefix, err)
	}
	n := 0
	for _, k := range keys {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		data, err := s.kv.Load(ctx, k)
		if err != nil {
			continue // deleted meanwhile, or unreadable: leave it
		}
		var head struct {
			CreatedAt int64 `json:"created_at"`
		}
		if jsonlimit.Object(data) != nil || json.Unmarshal(data, &head) != nil {
			continue
		}
		if s.cfg.Now().Sub(time.Unix(head.CreatedAt, 0)) > s.cfg.Retention {
			if s.kv.Delete(ctx, k) == nil {
				n++
			}
		}
	}
	return n, nil
}
