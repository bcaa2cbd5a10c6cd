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
	// MaxReplay bounds the stored items one request replays, in bytes
	// of their JSON: the history previous_response_id names plus the
	// items its item_reference inputs resolve to (default
	// DefaultMaxReplay). Beyond it the request is a 400 naming the
	// limit, before any provider is called.
	MaxReplay int64
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// DefaultMaxReplay is the default StoreConfig.MaxReplay: 8 MiB of item
// JSON is roughly two million tokens, more than any model's context
// window, so a longer replay could only fail upstream, after the gateway
// had held several copies of it (the stored records, the items, the chat
// body, its translation) per request.
const DefaultMaxReplay = 8 << 20

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
	if cfg.MaxReplay <= 0 {
		cfg.MaxReplay = DefaultMaxReplay
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
	var rec Record
	if err := s.loadInto(ctx, workspace, id, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// stored is a decoded record, whole or in part.
type stored interface {
	head() (id, workspace string, createdAt int64)
}

func (r *Record) head() (string, string, int64) { return r.ID, r.Workspace, r.CreatedAt }

func (t *replayTurn) head() (string, string, int64) { return t.ID, t.Workspace, t.CreatedAt }

// replayTurn is the part of a record a replay reads: decoding into it skips
// the record's response object, which repeats the output.
type replayTurn struct {
	ID                 string `json:"id"`
	Workspace          string `json:"workspace"`
	CreatedAt          int64  `json:"created_at"`
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	Input              []Item `json:"input"`
	Output             []Item `json:"output"`
}

// size is the bytes of JSON the turn's items replay.
func (t *replayTurn) size() int64 {
	var n int64
	for _, l := range [][]Item{t.Input, t.Output} {
		for _, it := range l {
			n += int64(len(it))
		}
	}
	return n
}

// loadInto decodes the record of id into v and checks that it belongs to
// workspace and has not expired.
func (s *Store) loadInto(ctx context.Context, workspace, id string, v stored) error {
	if !validID(id) {
		return errNotFound
	}
	data, err := s.kv.Load(ctx, s.key(workspace, id))
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound
	}
	if err != nil {
		return fmt.Errorf("responses: loading %s: %w", id, err)
	}
	if err := jsonlimit.Object(data); err != nil {
		return fmt.Errorf("responses: record %s: %w", id, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("responses: decoding %s: %w", id, err)
	}
	gotID, gotWS, created := v.head()
	if gotWS != workspace || gotID != id {
		return errNotFound
	}
	if s.cfg.Now().Sub(time.Unix(created, 0)) > s.cfg.Retention {
		_ = s.kv.Delete(ctx, s.key(workspace, id)) // best effort
		return errNotFound
	}
	return nil
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
// as OpenAI answers, and so is a history larger than MaxReplay.
func (s *Store) Chain(ctx context.Context, workspace, previousID string) ([]Item, error) {
	items, _, err := s.chain(ctx, workspace, previousID)
	return items, err
}

// Replay returns the conversation r continues: the history of its
// previous_response_id, then its input, with item references resolved.
// The stored items it replays (history and resolved references
// together) are at most MaxReplay bytes, or it is a 400 naming the
// limit.
func (s *Store) Replay(ctx context.Context, workspace string, r *Request) ([]Item, error) {
	var history []Item
	var used int64
	if r.PreviousResponseID != "" {
		var err error
		if history, used, err = s.chain(ctx, workspace, r.PreviousResponseID); err != nil {
			return nil, err
		}
	}
	return s.resolve(ctx, workspace, r.Conversation(history), used)
}

// replayTooLarge is the 400 of a replay beyond MaxReplay.
func (s *Store) replayTooLarge(param string) *apierror.Error {
	return apierror.BadRequest(param, "The stored conversation this request replays exceeds the gateway's limit of %d bytes (responses replay limit); start a new conversation, or send the history you need as input.", s.cfg.MaxReplay).WithCode("replay_too_large")
}

// chain is Chain, also returning the bytes of the items replayed. Each
// record is decoded without its response object, and the walk stops as
// soon as the history passes MaxReplay.
func (s *Store) chain(ctx context.Context, workspace, previousID string) ([]Item, int64, error) {
	var turns []*replayTurn
	var size int64
	for id := previousID; id != ""; {
		if len(turns) == maxChain {
			return nil, 0, apierror.BadRequest("previous_response_id", "The conversation of '%s' is longer than the gateway replays (%d responses).", previousID, maxChain)
		}
		t := new(replayTurn)
		err := s.loadInto(ctx, workspace, id, t)
		if errors.Is(err, errNotFound) {
			return nil, 0, apierror.BadRequest("previous_response_id", "Previous response with id '%s' not found.", id).WithCode("previous_response_not_found")
		}
		if err != nil {
			return nil, 0, storeFailure()
		}
		if size += t.size(); size > s.cfg.MaxReplay {
			return nil, 0, s.replayTooLarge("previous_response_id")
		}
		turns = append(turns, t)
		id = t.PreviousResponseID
	}
	n := 0
	for _, t := range turns {
		n += len(t.Input) + len(t.Output)
	}
	out := make([]Item, 0, n)
	for i := len(turns) - 1; i >= 0; i-- {
		out = append(out, turns[i].Input...)
		out = append(out, turns[i].Output...)
	}
	return out, size, nil
}

// ResolveReferences replaces item_reference items by the stored items
// they name (ids made by ItemIDs name their response). An unresolvable
// reference is a 400, and so are resolved items of more than MaxReplay
// bytes.
func (s *Store) ResolveReferences(ctx context.Context, workspace string, items []Item) ([]Item, error) {
	return s.resolve(ctx, workspace, items, 0)
}

// resolve is ResolveReferences when used bytes of the replay budget are
// spent already.
func (s *Store) resolve(ctx context.Context, workspace string, items []Item, used int64) ([]Item, error) {
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
		if used += int64(len(found)); used > s.cfg.MaxReplay {
			return nil, s.replayTooLarge("input")
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
	rec := new(replayTurn)
	err := s.loadInto(ctx, workspace, respID, rec)
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
