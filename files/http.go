package files

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// maxFormOverhead is what a multipart upload may carry beyond the file:
// boundaries, part headers and the purpose field.
const maxFormOverhead = 1 << 20

// maxFilename bounds the stored file name.
const maxFilename = 255

// ServeFiles serves the files API from the store for workspace:
// POST /v1/files, GET /v1/files, GET and DELETE /v1/files/{id}, and GET
// /v1/files/{id}/content. It returns false, writing nothing, for any
// other path, so the handler can call it first and fall through.
func (s *Store) ServeFiles(w http.ResponseWriter, r *http.Request, workspace string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/v1"), "/files")
	if !ok || (rest != "" && rest[0] != '/') {
		return false
	}
	rest = strings.Trim(rest, "/")
	var err error
	switch id, sub, _ := strings.Cut(rest, "/"); {
	case rest == "" && r.Method == http.MethodPost:
		err = s.serveUpload(w, r, workspace)
	case rest == "" && r.Method == http.MethodGet:
		err = s.serveList(w, r, workspace)
	case sub == "" && r.Method == http.MethodGet:
		var f *File
		if f, err = s.Get(r.Context(), workspace, id); err == nil {
			writeJSON(w, http.StatusOK, f)
		}
	case sub == "" && r.Method == http.MethodDelete:
		if err = s.Delete(r.Context(), workspace, id); err == nil {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "deleted": true})
		}
	case sub == "content" && r.Method == http.MethodGet:
		var (
			rd io.Reader
			f  *File
		)
		if rd, f, err = s.Open(r.Context(), workspace, id); err == nil {
			err = serveContent(w, rd, f)
		}
	default:
		err = apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "%s is not supported on %s", r.Method, apierror.QuotePath(r.URL.Path))
	}
	if err != nil {
		apierror.Write(w, AsAPIError(err))
	}
	return true
}

// serveContent streams a file's content a chunk at a time. An error
// before the first chunk is answered; one after it can only cut the
// answer short, which the declared length makes visible to the client.
func serveContent(w http.ResponseWriter, rd io.Reader, f *File) error {
	first := make([]byte, ChunkBytes)
	n, err := io.ReadFull(rd, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(first[:n]); err != nil {
		return nil
	}
	_, _ = io.Copy(w, rd)
	return nil
}

func (s *Store) serveUpload(w http.ResponseWriter, r *http.Request, workspace string) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return apierror.BadRequest("file", "upload the file as multipart/form-data with fields 'file' and 'purpose'")
	}
	limit := s.MaxBytes()
	body := http.MaxBytesReader(w, r.Body, limit+maxFormOverhead)
	mr := multipart.NewReader(body, params["boundary"])
	var (
		purpose, filename string
		rec               *record
	)
	// The file's chunks are written as they arrive; they are removed
	// again unless the upload ends with a stored record.
	defer func() {
		if rec != nil {
			s.dropChunks(workspace, rec.ID, rec.Chunks)
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadReadError(err, limit)
		}
		switch part.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, 65))
			if err != nil {
				return uploadReadError(err, limit)
			}
			purpose = string(b)
		case "file":
			if rec != nil {
				return apierror.BadRequest("file", "upload one 'file'")
			}
			if rec, err = s.writeChunks(r.Context(), workspace, part); err != nil {
				var (
					ae *apierror.Error
					se *StoreError
				)
				if errors.As(err, &ae) || errors.As(err, &se) {
					return err
				}
				return uploadReadError(err, limit)
			}
			filename = cleanFilename(part.FileName())
		default:
			// Other form fields (expires_after[…]) are not supported
			// by the gateway's store; refuse rather than ignore them.
			return apierror.BadRequest(part.FormName(), "the gateway's file store does not support the field %s", apierror.QuoteID(part.FormName()))
		}
		_ = part.Close()
	}
	if rec == nil {
		return apierror.BadRequest("file", "'file' is required")
	}
	if purpose == "" {
		return apierror.BadRequest("purpose", "'purpose' is required")
	}
	if !validPurpose(purpose) {
		return apierror.BadRequest("purpose", "'purpose' must be one of %s", strings.Join(Purposes, ", "))
	}
	rec.Filename, rec.Purpose = filename, purpose
	if err := s.storeMeta(r.Context(), rec); err != nil {
		return err
	}
	f := rec.File
	rec = nil // stored: keep its chunks
	writeJSON(w, http.StatusOK, &f)
	return nil
}

func uploadReadError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge(limit)
	}
	return apierror.BadRequest("file", "the multipart upload could not be read")
}

func cleanFilename(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == "/" || !utf8.ValidString(name) {
		name = "upload"
	}
	for len(name) > maxFilename {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

func validPurpose(p string) bool {
	for _, v := range Purposes {
		if p == v {
			return true
		}
	}
	return false
}

func (s *Store) serveList(w http.ResponseWriter, r *http.Request, workspace string) error {
	q := r.URL.Query()
	p := ListParams{Purpose: q.Get("purpose"), After: q.Get("after"), Order: q.Get("order")}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > 10000 {
			return apierror.BadRequest("limit", "'limit' must be an integer from 1 to 10000")
		}
		p.Limit = n
	}
	if p.Order != "" && p.Order != "asc" && p.Order != "desc" {
		return apierror.BadRequest("order", "'order' must be asc or desc")
	}
	page, err := s.List(r.Context(), workspace, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
