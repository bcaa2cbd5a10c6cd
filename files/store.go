// Package files is the gateway's own file store: uploads (POST /v1/files)
// for providers without a files API, and the output and error files of
// managed batches. Files are scoped to a workspace: a file is found only
// with the workspace it was stored under. Objects have OpenAI's file
// shape, so SDKs read them as OpenAI files.
package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// DefaultMaxBytes is the largest file the gateway stores: 100 MiB, half
// OpenAI's 200 MB batch input limit. Content is stored and read in
// chunks (ChunkBytes), so the limit bounds storage, not memory.
const DefaultMaxBytes = 100 << 20

// dropTimeout bounds the clean-up of a failed creation.
const dropTimeout = 30 * time.Second

// IDPrefix starts every id this store makes. The "gw" after OpenAI's
// "file-" lets the handler route a file id to the gateway's store or to
// the provider by its shape alone.
const IDPrefix = "file-gw"

// Purposes a client may upload with (OpenAI's list); PurposeBatchOutput
// is set by the gateway on batch results.
var Purposes = []string{"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}

// Purpose values used by the batch engine.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Prefix is the storage key prefix (default "llm_gateway/files").
	Prefix string
	// MaxBytes is the largest file accepted (default DefaultMaxBytes).
	MaxBytes int64
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// Store keeps files in a KV. It is safe for concurrent use as far as
// the KV is.
type Store struct {
	kv  KV
	cfg Config
	// max is the size limit, changed by SetMaxBytes when a reloaded
	// config sets another (the store outlives configs).
	max atomic.Int64
}

// NewStore returns a store over kv.
func NewStore(kv KV, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "llm_gateway/files"
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	st := &Store{kv: kv, cfg: cfg}
	st.max.Store(cfg.MaxBytes)
	return st
}

// MaxBytes returns the largest file the store accepts.
func (s *Store) MaxBytes() int64 { return s.max.Load() }

// SetMaxBytes changes the size limit (DefaultMaxBytes when n <= 0) for
// files created from now on.
func (s *Store) SetMaxBytes(n int64) {
	if n <= 0 {
		n = DefaultMaxBytes
	}
	s.max.Store(n)
}

// File is OpenAI's file object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	// Status is deprecated upstream but still read by SDKs; always
	// "processed" here, as a stored file is ready at once.
	Status string `json:"status"`
}

// record is what is stored beside the content.
type record struct {
	File
	Workspace string `json:"workspace"`
	// Layout is layoutChunked when the content is in Chunks chunks
	// (see content.go); empty for one ".data" key.
	Layout string `json:"layout,omitempty"`
	Chunks int    `json:"chunks,omitempty"`
}

// IsGatewayID reports whether id was made by this store, so the handler
// serves it from the gateway rather than from a provider.
func IsGatewayID(id string) bool {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return IDPrefix + hex.EncodeToString(b[:])
}

// WorkspaceDir returns the storage folder of a workspace under prefix;
// the workspace is hashed so any string makes a safe path segment.
func WorkspaceDir(prefix, workspace string) string {
	h := sha256.Sum256([]byte(workspace))
	return prefix + "/" + hex.EncodeToString(h[:8])
}

func (s *Store) metaKey(ws, id string) string {
	return WorkspaceDir(s.cfg.Prefix, ws) + "/" + id + ".json"
}
func (s *Store) dataKey(ws, id string) string {
	return WorkspaceDir(s.cfg.Prefix, ws) + "/" + id + ".data"
}

// Create stores content as a new file of workspace and returns its
// object (see CreateFrom).
func (s *Store) Create(ctx context.Context, workspace, filename, purpose string, content []byte) (*File, error) {
	if int64(len(content)) > s.MaxBytes() {
		return nil, TooLarge(s.MaxBytes())
	}
	return s.CreateFrom(ctx, workspace, filename, purpose, bytes.NewReader(content))
}

func (s *Store) storeMeta(ctx context.Context, rec *record) error {
	meta, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := s.kv.Store(ctx, s.metaKey(rec.Workspace, rec.ID), meta); err != nil {
		return &StoreError{Op: "storing metadata", Err: err}
	}
	return nil
}

// TooLarge is the 413 for a file over the size limit.
func TooLarge(limit int64) *apierror.Error {
	return apierror.Newf(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest,
		"the file is larger than the gateway's limit of %d bytes", limit).WithCode("file_too_large")
}

// NotFound is OpenAI's 404 for an unknown file id.
func NotFound(id string) *apierror.Error {
	return apierror.Newf(http.StatusNotFound, apierror.TypeInvalidRequest, "No such File object: %s", apierror.QuoteID(id)).WithCode("not_found")
}

// storeFailure is the 500 of a file record that was read but cannot be
// understood (not JSON, or over the bounds): no retry will mend it.
func storeFailure() *apierror.Error {
	return apierror.New(http.StatusInternalServerError, apierror.TypeServer, "the gateway could not read a record of its file store")
}

// errCorrupt marks a record loadMeta read but could not parse.
var errCorrupt = errors.New("files: unreadable record")

// loadMeta reads a record: fs.ErrNotExist when there is none, a
// *StoreError when the KV failed, errCorrupt when it is not a record.
func (s *Store) loadMeta(ctx context.Context, key string) (*record, error) {
	data, err := s.kv.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, &StoreError{Op: "reading metadata", Err: err}
	}
	if jsonlimit.Object(data) != nil {
		return nil, errCorrupt
	}
	var rec record
	if json.Unmarshal(data, &rec) != nil {
		return nil, errCorrupt
	}
	return &rec, nil
}

// Get returns the object of id in workspace, or a 404 apierror; a
// *StoreError when the KV fails (see AsAPIError).
func (s *Store) Get(ctx context.Context, workspace, id string) (*File, error) {
	rec, err := s.getRecord(ctx, workspace, id)
	if err != nil {
		return nil, err
	}
	return &rec.File, nil
}

func (s *Store) getRecord(ctx context.Context, workspace, id string) (*record, error) {
	if !IsGatewayID(id) {
		return nil, NotFound(id)
	}
	rec, err := s.loadMeta(ctx, s.metaKey(workspace, id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, NotFound(id)
	case errors.Is(err, errCorrupt):
		return nil, storeFailure()
	case err != nil:
		return nil, err
	}
	if rec.Workspace != workspace || rec.ID != id {
		return nil, NotFound(id)
	}
	return rec, nil
}

// Content returns the bytes of id in workspace, or a 404 apierror (a
// *StoreError when the KV fails). It holds the whole file; Open reads it
// a chunk at a time.
func (s *Store) Content(ctx context.Context, workspace, id string) ([]byte, *File, error) {
	r, f, err := s.Open(ctx, workspace, id)
	if err != nil {
		return nil, nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(f.Bytes, s.MaxBytes())+1))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), f, nil
}

// Delete removes id from workspace, or returns a 404 apierror.
func (s *Store) Delete(ctx context.Context, workspace, id string) error {
	rec, err := s.getRecord(ctx, workspace, id)
	if err != nil {
		return err
	}
	// Metadata first: a file without metadata is invisible, and its
	// orphaned content is harmless if the second delete fails.
	if err := s.kv.Delete(ctx, s.metaKey(workspace, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &StoreError{Op: "deleting metadata", Err: err}
	}
	if rec.Layout == layoutChunked {
		for i := 0; i < rec.Chunks; i++ {
			_ = s.kv.Delete(ctx, s.chunkKey(workspace, id, i))
		}
	}
	_ = s.kv.Delete(ctx, s.dataKey(workspace, id))
	return nil
}

// ListParams are the query parameters of GET /v1/files.
type ListParams struct {
	Purpose string
	// Limit is 1–10000 (OpenAI's range; default 10000).
	Limit int
	// After is the id of the last file of the previous page.
	After string
	// Order is "desc" (default, newest first) or "asc".
	Order string
}

// Page is OpenAI's file list.
type Page struct {
	Object  string  `json:"object"`
	Data    []*File `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// List returns a page of the workspace's files. It reads every file
// record of the workspace, which is fine for the hundreds of files a
// workspace keeps for batches.
func (s *Store) List(ctx context.Context, workspace string, p ListParams) (*Page, error) {
	keys, err := ListKeys(ctx, s.kv, WorkspaceDir(s.cfg.Prefix, workspace), false)
	if err != nil {
		return nil, &StoreError{Op: "listing", Err: err}
	}
	var all []*File
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		rec, err := s.loadMeta(ctx, k)
		var se *StoreError
		if errors.As(err, &se) {
			// A store that fails mid-list would hide files: the list
			// is refused instead.
			return nil, err
		}
		if err != nil || rec.Workspace != workspace {
			continue // deleted meanwhile, or unreadable: not listed
		}
		if p.Purpose != "" && rec.Purpose != p.Purpose {
			continue
		}
		all = append(all, &rec.File)
	}
	asc := p.Order == "asc"
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.CreatedAt != b.CreatedAt {
			return (a.CreatedAt < b.CreatedAt) == asc
		}
		return (a.ID < b.ID) == asc
	})
	if p.After != "" {
		for i, f := range all {
			if f.ID == p.After {
				all = all[i+1:]
				break
			}
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 10000
	}
	page := &Page{Object: "list", Data: all}
	if len(all) > limit {
		page.Data, page.HasMore = all[:limit], true
	}
	if page.Data == nil {
		page.Data = []*File{}
	}
	if n := len(page.Data); n > 0 {
		first, last := page.Data[0].ID, page.Data[n-1].ID
		page.FirstID, page.LastID = &first, &last
	}
	return page, nil
}
