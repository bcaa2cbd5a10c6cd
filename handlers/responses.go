package handlers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/responses"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// responsesAdapter is the FormatAdapter of one POST /v1/responses: native
// targets (responses.Native) are sent the client's body; the others a
// chat completion made by responses.ToChat, from the conversation with
// its previous_response_id history replayed, whose answer or stream
// becomes a Response again, stored (store defaults to true) in the
// caller's workspace before the client has its end.
type responsesAdapter struct {
	store *responses.Store
	ws    string
	// body is the body r was parsed from.
	body []byte
	r    *responses.Request
	// items is the conversation ToChat sent, for truncation "auto".
	items []responses.Item
	// check is app.CheckStore: a Response to store is refused before the
	// provider call while the store is down, rather than billed and lost.
	check func(ctx context.Context, what string) *apierror.Error
}

// responsesAdapter parses and bounds-checks the Responses create body of
// q, before any provider call.
func (g *Gateway) responsesAdapter(_ *http.Request, q *Request) (*responsesAdapter, error) {
	r, err := responses.Parse(q.Call.Body)
	if err != nil {
		return nil, err
	}
	return &responsesAdapter{store: g.app.ResponseStore(), ws: q.Identity.WorkspaceID, body: q.Call.Body, r: r,
		check: g.app.CheckStore}, nil
}

// Native implements FormatAdapter.
func (a *responsesAdapter) Native(t *routing.Target) bool {
	return responses.Native(t.Settings.Provider)
}

// ToChat implements FormatAdapter: the stored chain of
// previous_response_id, item references resolved, then this request.
func (a *responsesAdapter) ToChat(ctx context.Context, body []byte) ([]byte, error) {
	if !bytes.Equal(body, a.body) {
		// A before-request check replaced the body.
		r, err := responses.Parse(body)
		if err != nil {
			return nil, err
		}
		a.body, a.r = body, r
	}
	if a.r.Stored() && a.check != nil {
		if e := a.check(ctx, "the response"); e != nil {
			return nil, e
		}
	}
	// The replay is bounded (responses.DefaultMaxReplay): a long stored
	// conversation is a 400 here, not copies of it held per request.
	items, err := a.store.Replay(ctx, a.ws, a.r)
	if err != nil {
		return nil, err
	}
	a.items = items
	return responses.ToChat(a.r, items)
}

// Overflow implements FormatAdapter: a context overflow is tried once
// more without the oldest items with truncation "auto", and is the
// Responses API's 400 otherwise.
func (a *responsesAdapter) Overflow(status int, body []byte, retried bool) ([]byte, *apierror.Error) {
	if !responses.IsContextOverflow(status, body) {
		return nil, nil
	}
	if a.r.TruncationAuto() && !retried {
		if items, ok := responses.DropOldest(a.items); ok {
			if chat, err := responses.ToChat(a.r, items); err == nil {
				return chat, nil
			}
		}
	}
	return nil, responses.OverflowError()
}

// save stores resp when the client asked for it (the default).
func (a *responsesAdapter) save(ctx context.Context, resp *responses.Response) error {
	if !a.r.Stored() || a.store == nil {
		return nil
	}
	return a.store.Save(ctx, responses.RecordOf(a.ws, a.r, resp))
}

// FromChat implements FormatAdapter.
func (a *responsesAdapter) FromChat(ctx context.Context, chat []byte) ([]byte, error) {
	resp, err := responses.FromChat(chat, a.r)
	if err != nil {
		return nil, err
	}
	if err := a.save(ctx, resp); err != nil {
		return nil, apierror.New(http.StatusInternalServerError, apierror.TypeServer, "the response could not be stored")
	}
	return resp.JSON(), nil
}

// Stream implements FormatAdapter: the Responses event sequence, stored
// just before its terminal event.
func (a *responsesAdapter) Stream(ctx context.Context, w io.Writer) AdaptedStream {
	sw := responses.NewStreamWriter(w, a.r)
	sw.BeforeTerminal = func(resp *responses.Response) error { return a.save(ctx, resp) }
	return sw
}

// storedPath splits /responses/{id} and /responses/{id}/input_items.
func storedPath(method, path string) (id string, items, ok bool) {
	if method != http.MethodGet && method != http.MethodDelete {
		return "", false, false
	}
	rest, ok := strings.CutPrefix(path, "/responses/")
	if !ok || rest == "" {
		return "", false, false
	}
	id, sub, hasSub := strings.Cut(rest, "/")
	switch {
	case !hasSub:
		return id, false, true
	case sub == "input_items" && method == http.MethodGet:
		return id, true, true
	}
	return "", false, false
}

// storedResponse answers GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items from the response store when the
// gateway made the response, in the caller's workspace. Any other id is
// routed on: a native target is asked, a translated one answers 404.
func (g *Gateway) storedResponse(r *http.Request, q *Request) (*localAnswer, error) {
	id, items, ok := storedPath(q.Call.Method, q.Call.Path)
	store := g.app.ResponseStore()
	if !ok || store == nil {
		return nil, nil
	}
	ctx, ws := r.Context(), q.Identity.WorkspaceID
	rec, err := store.Get(ctx, ws, id)
	if err != nil {
		if apierror.As(err).Status == http.StatusNotFound {
			return nil, nil
		}
		return nil, err
	}
	var body []byte
	switch {
	case items:
		lq, err := responses.ParseListQuery(r.URL.Query())
		if err != nil {
			return nil, err
		}
		if body, err = store.InputItems(ctx, ws, id, lq); err != nil {
			return nil, err
		}
	case q.Call.Method == http.MethodDelete:
		if body, err = store.Delete(ctx, ws, id); err != nil {
			return nil, err
		}
	default:
		body = rec.Response
	}
	h := http.Header{"Content-Type": {"application/json"}}
	return &localAnswer{op: providers.OpResponses, held: &heldAnswer{status: http.StatusOK, header: h, body: body}}, nil
}

// storedOnlyHere refuses a stored-response call (GET, DELETE,
// input_items) to a translated target: the provider keeps no responses,
// and the gateway's store had none with this id.
func storedOnlyHere(c *providers.Call, t *routing.Target) *apierror.Error {
	if c.Op != providers.OpProxy || responses.Native(t.Settings.Provider) {
		return nil
	}
	id, _, ok := storedPath(c.Method, c.Path)
	if !ok {
		return nil
	}
	return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "No response found with id '%s'.", id).WithCode("not_found")
}
