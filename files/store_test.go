package files

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

func upload(t *testing.T, s *Store, ws, purpose, name string, content []byte) *httptest.ResponseRecorder {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if purpose != "" {
		_ = mw.WriteField("purpose", purpose)
	}
	if content != nil {
		fw, _ := mw.CreateFormFile("file", name)
		_, _ = fw.Write(content)
	}
	_ = mw.Close()
	r := httptest.NewRequest("POST", "/v1/files", &buf)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	w := httptest.NewRecorder()
	if !s.ServeFiles(w, r, ws) {
		t.Fatal("ServeFiles did not serve POST /v1/files")
	}
	return w
}

func do(t *testing.T, s *Store, ws, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	if !s.ServeFiles(w, httptest.NewRequest(method, target, nil), ws) {
		t.Fatalf("ServeFiles did not serve %s %s", method, target)
	}
	return w
}

func kvs(t *testing.T) map[string]KV {
	m := map[string]KV{"caddy storage": &certmagic.FileStorage{Path: t.TempDir()}}
	if redistest.Available() == nil {
		m["redis"] = NewRedisKV(redistest.Client(t, 0))
	}
	return m
}

func TestStoreCRUDAndIsolation(t *testing.T) {
	for name, kv := range kvs(t) {
		t.Run(name, func(t *testing.T) {
			s := NewStore(kv, Config{Prefix: "test/" + t.Name()})
			w := upload(t, s, "ws-a", "batch", "in.jsonl", []byte("line1\nline2\n"))
			if w.Code != 200 {
				t.Fatalf("upload: %d %s", w.Code, w.Body)
			}
			var f File
			_ = json.Unmarshal(w.Body.Bytes(), &f)
			if !IsGatewayID(f.ID) || f.Object != "file" || f.Bytes != 12 || f.Filename != "in.jsonl" || f.Purpose != "batch" || f.Status != "processed" || f.CreatedAt == 0 {
				t.Fatalf("file object %+v", f)
			}
			if w := do(t, s, "ws-a", "GET", "/v1/files/"+f.ID); w.Code != 200 || !strings.Contains(w.Body.String(), f.ID) {
				t.Fatalf("retrieve: %d %s", w.Code, w.Body)
			}
			if w := do(t, s, "ws-a", "GET", "/v1/files/"+f.ID+"/content"); w.Code != 200 || w.Body.String() != "line1\nline2\n" {
				t.Fatalf("content: %d %q", w.Code, w.Body)
			}
			// Another workspace sees nothing of it.
			for _, tgt := range []string{"/v1/files/" + f.ID, "/v1/files/" + f.ID + "/content"} {
				if w := do(t, s, "ws-b", "GET", tgt); w.Code != 404 {
					t.Fatalf("ws-b %s: %d", tgt, w.Code)
				}
			}
			if w := do(t, s, "ws-b", "DELETE", "/v1/files/"+f.ID); w.Code != 404 {
				t.Fatalf("ws-b delete: %d", w.Code)
			}
			if w := do(t, s, "ws-b", "GET", "/v1/files"); !strings.Contains(w.Body.String(), `"data":[]`) {
				t.Fatalf("ws-b list: %s", w.Body)
			}
			if w := do(t, s, "ws-a", "GET", "/v1/files"); !strings.Contains(w.Body.String(), f.ID) {
				t.Fatalf("ws-a list: %s", w.Body)
			}
			if w := do(t, s, "ws-a", "DELETE", "/v1/files/"+f.ID); w.Code != 200 || !strings.Contains(w.Body.String(), `"deleted":true`) {
				t.Fatalf("delete: %d %s", w.Code, w.Body)
			}
			if w := do(t, s, "ws-a", "GET", "/v1/files/"+f.ID); w.Code != 404 {
				t.Fatalf("after delete: %d", w.Code)
			}
		})
	}
}

func TestUploadErrors(t *testing.T) {
	s := NewStore(&certmagic.FileStorage{Path: t.TempDir()}, Config{MaxBytes: 10})
	tests := []struct {
		name, purpose string
		content       []byte
		status        int
		param         string
	}{
		{"no file", "batch", nil, 400, "file"},
		{"no purpose", "", []byte("x"), 400, "purpose"},
		{"bad purpose", "training", []byte("x"), 400, "purpose"},
		{"too large", "batch", []byte("01234567890"), 413, ""},
		{"at limit", "batch", []byte("0123456789"), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := upload(t, s, "ws", tc.purpose, "f.jsonl", tc.content)
			if w.Code != tc.status {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if tc.param != "" && !strings.Contains(w.Body.String(), `"param":"`+tc.param+`"`) {
				t.Fatalf("param not named: %s", w.Body)
			}
		})
	}
	r := httptest.NewRequest("POST", "/v1/files", strings.NewReader("{}"))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeFiles(w, r, "ws")
	if w.Code != 400 {
		t.Fatalf("json upload: %d", w.Code)
	}
	if s.ServeFiles(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/filesystem", nil), "ws") {
		t.Fatal("served /v1/filesystem")
	}
	if w := do(t, s, "ws", "GET", "/v1/files/file-abc"); w.Code != 404 {
		t.Fatalf("foreign id: %d", w.Code)
	}
}

func TestListPagination(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewStore(&certmagic.FileStorage{Path: t.TempDir()}, Config{Now: func() time.Time { now = now.Add(time.Second); return now }})
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		purpose := "batch"
		if i == 2 {
			purpose = "fine-tune"
		}
		f, err := s.Create(ctx, "ws", "f", purpose, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, f.ID)
	}
	p, _ := s.List(ctx, "ws", ListParams{Limit: 2})
	if len(p.Data) != 2 || p.Data[0].ID != ids[4] || p.Data[1].ID != ids[3] || !p.HasMore || *p.LastID != ids[3] {
		t.Fatalf("page 1 %+v", p)
	}
	p, _ = s.List(ctx, "ws", ListParams{Limit: 2, After: *p.LastID})
	if len(p.Data) != 2 || p.Data[0].ID != ids[2] || !p.HasMore {
		t.Fatalf("page 2 %+v", p)
	}
	p, _ = s.List(ctx, "ws", ListParams{Limit: 2, After: *p.LastID})
	if len(p.Data) != 1 || p.Data[0].ID != ids[0] || p.HasMore {
		t.Fatalf("page 3 %+v", p)
	}
	p, _ = s.List(ctx, "ws", ListParams{Purpose: "batch", Order: "asc"})
	if len(p.Data) != 4 || p.Data[0].ID != ids[0] || p.Data[3].ID != ids[4] {
		t.Fatalf("purpose asc %+v", p)
	}
	if w := do(t, s, "ws", "GET", "/v1/files?limit=0"); w.Code != http.StatusBadRequest {
		t.Fatalf("limit=0: %d", w.Code)
	}
}

// TestChunkedContent stores a file of several chunks, reads it whole and
// streamed, reads a record of the single-key layout written before chunks
// existed, and deletes every chunk with the file.
func TestChunkedContent(t *testing.T) {
	for name, kv := range kvs(t) {
		t.Run(name, func(t *testing.T) {
			prefix := "test/" + t.Name()
			s := NewStore(kv, Config{Prefix: prefix})
			ctx := context.Background()
			content := bytes.Repeat([]byte("0123456789abcdef"), (5*ChunkBytes/2)/16)
			f, err := s.CreateFrom(ctx, "ws", "big.jsonl", PurposeBatch, bytes.NewReader(content))
			if err != nil || f.Bytes != int64(len(content)) {
				t.Fatalf("create %+v %v", f, err)
			}
			if _, n, _ := s.Chunks(ctx, "ws", f.ID); n != 3 {
				t.Fatalf("%d chunks, want 3", n)
			}
			got, _, err := s.Content(ctx, "ws", f.ID)
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("content differs (%d bytes) %v", len(got), err)
			}
			w := do(t, s, "ws", "GET", "/v1/files/"+f.ID+"/content")
			if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), content) || w.Header().Get("Content-Length") != itoa(len(content)) {
				t.Fatalf("served %d, %d bytes", w.Code, w.Body.Len())
			}
			// A record of the single-key layout.
			legacy := newID()
			_ = kv.Store(ctx, s.dataKey("ws", legacy), []byte("old\n"))
			meta, _ := json.Marshal(record{File: File{ID: legacy, Object: "file", Bytes: 4, Purpose: PurposeBatch}, Workspace: "ws"})
			_ = kv.Store(ctx, s.metaKey("ws", legacy), meta)
			if got, _, err := s.Content(ctx, "ws", legacy); err != nil || string(got) != "old\n" {
				t.Fatalf("legacy content %q %v", got, err)
			}
			if err := s.Delete(ctx, "ws", f.ID); err != nil {
				t.Fatal(err)
			}
			keys, _ := ListKeys(ctx, kv, prefix, true)
			for _, k := range keys {
				if strings.Contains(k, f.ID) {
					t.Fatalf("left after delete: %s", k)
				}
			}
			s.SetMaxBytes(ChunkBytes + 1)
			if _, err := s.CreateFrom(ctx, "ws", "big.jsonl", PurposeBatch, bytes.NewReader(content)); err == nil || !strings.Contains(err.Error(), "limit") {
				t.Fatalf("over the limit: %v", err)
			}
			keys, _ = ListKeys(ctx, kv, prefix, true)
			for _, k := range keys {
				if strings.Contains(k, ".data/") { // a chunk (Caddy storage may keep empty folders)
					t.Fatalf("chunk after a refused create: %s", k)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
