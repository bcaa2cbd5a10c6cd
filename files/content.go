package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// ChunkBytes is the size of the pieces a file's content is stored in.
// Content is written and read one chunk at a time, so storing or reading
// a file (an upload, a batch's input read line by line, a batch's output
// assembled from its parts) holds about one chunk in memory, not the
// whole file.
const ChunkBytes = 1 << 20

// layoutChunked marks a record whose content is stored in chunks; records
// written before chunks existed have one ".data" key.
const layoutChunked = "chunked"

func (s *Store) chunkKey(ws, id string, i int) string {
	return fmt.Sprintf("%s/%06d", s.dataKey(ws, id), i)
}

// CreateFrom stores what r yields as a new file of workspace, one chunk
// at a time, and returns its object; content over the size limit is a
// 413 (TooLarge) and nothing is kept. The content is written before the
// metadata, so a listed file always has its content.
func (s *Store) CreateFrom(ctx context.Context, workspace, filename, purpose string, r io.Reader) (*File, error) {
	rec, err := s.writeChunks(ctx, workspace, r)
	if err != nil {
		return nil, err
	}
	rec.Filename, rec.Purpose = filename, purpose
	if err := s.storeMeta(ctx, rec); err != nil {
		s.dropChunks(workspace, rec.ID, rec.Chunks)
		return nil, err
	}
	return &rec.File, nil
}

// writeChunks stores r's content as the chunks of a new file and returns
// its record, not yet stored; on error no chunk is left.
func (s *Store) writeChunks(ctx context.Context, workspace string, r io.Reader) (*record, error) {
	rec := &record{File: File{ID: newID(), Object: "file", CreatedAt: s.cfg.Now().Unix(), Status: "processed"},
		Workspace: workspace, Layout: layoutChunked}
	limit := s.MaxBytes()
	buf := make([]byte, ChunkBytes)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if rec.Bytes+int64(n) > limit {
				s.dropChunks(workspace, rec.ID, rec.Chunks)
				return nil, TooLarge(limit)
			}
			if serr := s.kv.Store(ctx, s.chunkKey(workspace, rec.ID, rec.Chunks), bytes.Clone(buf[:n])); serr != nil {
				s.dropChunks(workspace, rec.ID, rec.Chunks)
				return nil, &StoreError{Op: "storing content", Err: serr}
			}
			rec.Chunks++
			rec.Bytes += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return rec, nil
		}
		if err != nil {
			s.dropChunks(workspace, rec.ID, rec.Chunks)
			return nil, err
		}
	}
}

// dropChunks deletes the first n chunks of a file whose creation failed,
// with a context of its own: the caller's may be what ended it.
func (s *Store) dropChunks(ws, id string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	for i := 0; i < n; i++ {
		_ = s.kv.Delete(ctx, s.chunkKey(ws, id, i))
	}
}

// Chunks returns the object of id in workspace and how many chunks its
// content has (Chunk reads each), or a 404 apierror.
func (s *Store) Chunks(ctx context.Context, workspace, id string) (*File, int, error) {
	rec, err := s.getRecord(ctx, workspace, id)
	if err != nil {
		return nil, 0, err
	}
	if rec.Layout != layoutChunked {
		return &rec.File, 1, nil
	}
	return &rec.File, rec.Chunks, nil
}

// Chunk returns chunk i of the content of id in workspace, as counted by
// Chunks. Storage faults are a *StoreError, which a caller may retry; a
// missing chunk is a 404 apierror.
func (s *Store) Chunk(ctx context.Context, workspace, id string, i int) ([]byte, error) {
	rec, err := s.getRecord(ctx, workspace, id)
	if err != nil {
		return nil, err
	}
	key := s.dataKey(workspace, id)
	if rec.Layout == layoutChunked {
		key = s.chunkKey(workspace, id, i)
	}
	b, err := s.kv.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, NotFound(id)
	}
	if err != nil {
		return nil, &StoreError{Op: "reading content", Err: err}
	}
	return b, nil
}

// ChunkReader reads n chunks in order through load, one at a time; a
// load error ends the read with that error.
type ChunkReader struct {
	n, next int
	cur     []byte
	load    func(i int) ([]byte, error)
}

// NewChunkReader returns a reader of n chunks fetched by load.
func NewChunkReader(n int, load func(i int) ([]byte, error)) *ChunkReader {
	return &ChunkReader{n: n, load: load}
}

// Read implements io.Reader.
func (c *ChunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.next >= c.n {
			return 0, io.EOF
		}
		b, err := c.load(c.next)
		if err != nil {
			return 0, err
		}
		c.cur, c.next = b, c.next+1
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// Open returns a reader of the content of id in workspace that holds one
// chunk at a time, and the file's object; a 404 apierror when unknown.
func (s *Store) Open(ctx context.Context, workspace, id string) (io.Reader, *File, error) {
	f, n, err := s.Chunks(ctx, workspace, id)
	if err != nil {
		return nil, nil, err
	}
	return NewChunkReader(n, func(i int) ([]byte, error) { return s.Chunk(ctx, workspace, id, i) }), f, nil
}
