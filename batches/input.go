package batches

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// input is where a running batch reads its lines from. A gateway file is
// read a chunk at a time on every pass (validation, dispatch, the lines
// left at a cancel), so a batch holds one chunk and one line, not its
// file; a provider's file is fetched once when the batch starts and held
// while it runs, as the provider's files API has no ranges.
type input struct {
	e      *Engine
	ws, id string
	batch  string
	held   []byte
}

// openInput prepares the input of a starting batch; the error is the
// batch's failure when the file cannot be read.
func (e *Engine) openInput(caller Caller, header http.Header, batchID, fileID string) (*input, error) {
	in := &input{e: e, ws: caller.WorkspaceID, id: fileID, batch: batchID}
	if files.IsGatewayID(fileID) {
		return in, nil
	}
	r := e.runnerFor(caller.Route)
	if r == nil {
		return nil, errRoute
	}
	h := header.Clone()
	h.Del("Content-Type")
	status, content, err := r.Run(e.ctx, caller, http.MethodGet, "/v1/files/"+fileID+"/content", h, nil)
	if err != nil || status != http.StatusOK {
		return nil, err
	}
	if int64(len(content)) > e.cfg.Files.MaxBytes() {
		return nil, files.TooLarge(e.cfg.Files.MaxBytes())
	}
	in.held = content
	return in, nil
}

// errRoute stands for abortRoute where an error is returned.
var errRoute = apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, abortRoute.Message)

// reader returns a new pass over the input. Storage errors are retried
// (see Engine.retry); a file deleted meanwhile ends the pass with a 404.
func (in *input) reader() io.Reader {
	if in.held != nil || !files.IsGatewayID(in.id) {
		return bytes.NewReader(in.held)
	}
	var n int
	err := in.e.retry(in.batch, "input", func(ctx context.Context) (err error) {
		_, n, err = in.e.cfg.Files.Chunks(ctx, in.ws, in.id)
		return err
	})
	if err != nil {
		return errReader{err}
	}
	return files.NewChunkReader(n, func(i int) (b []byte, err error) {
		err = in.e.retry(in.batch, "input", func(ctx context.Context) (err error) {
			b, err = in.e.cfg.Files.Chunk(ctx, in.ws, in.id, i)
			return err
		})
		return b, err
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// lines calls fn with each valid request of the input, in file order,
// until fn returns false; invalid lines (validation rejected the batch
// before any ran, so there are none unless the file changed) are skipped.
func (in *input) lines(endpoint string, fn func(inputLine) bool) error {
	return scanLines(in.reader(), in.e.cfg.MaxLineBytes, func(_ int, raw []byte) bool {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			return true
		}
		l, code, _, _ := parseLine(raw, endpoint)
		if code != "" {
			return true
		}
		return fn(l)
	})
}
