package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Issue 34, "the same limits on every road": budgets and cost policies
// reserve for every way in and every way of routing, a new limit binds
// every instance at once, counters count what the ledger counts, and a
// gateway without limits needs no budget store.

// heldOpenAI is an OpenAI-compatible provider that holds every answer
// until release is closed, so no settlement can make room in a budget
// while a burst is decided: only the reservations bound it. It answers
// streamed and JSON chat completions and Responses, each reporting 1,000
// prompt and 500 completion tokens.
type heldOpenAI struct {
	*fakeOpenAI
	arrived atomic.Int32
	gate    atomic.Pointer[chan struct{}]
}

func newHeldOpenAI(t *testing.T) *heldOpenAI {
	h := &heldOpenAI{fakeOpenAI: newFakeOpenAI(t)}
	open := make(chan struct{})
	close(open)
	h.gate.Store(&open)
	h.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		h.arrived.Add(1)
		<-*h.gate.Load()
		usage := `"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500}`
		switch {
		case r.URL.Path == "/v1/responses":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o-mini",`+
				`"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],`+
				`"usage":{"input_tokens":1000,"output_tokens":500,"total_tokens":1500}}`)
		case strings.Contains(string(body), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`+"\n\n")
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],`+usage+`}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+usage+`}`)
		}
		return true
	}
	return h
}

// hold makes the provider hold answers from now on; the returned
// function lets them go.
func (h *heldOpenAI) hold() (release func()) {
	gate := make(chan struct{})
	h.gate.Store(&gate)
	h.arrived.Store(0)
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// budgetKeysSite is the keys site (a Caddyfile virtual key "openai" to
// up, the organisation admin) with budgets waiting 1 ms at most for
// reservations in flight, so a burst against a spent budget is refused
// while the provider holds the admitted answers; with ratelimit,
// llm_ratelimit is in front of llm_gateway.
func budgetKeysSite(t *testing.T, upURL string, ratelimit bool, llm string) {
	t.Helper()
	s := newKeysSite(t, vkOpenAI("openai", upURL)+"budgets {\n\t\t\tmax_wait 1ms\n\t\t}\n\t\t"+llm)
	newHTTPPort()
	cf := s.caddyfile()
	if ratelimit {
		cf = strings.Replace(cf, "\t\tllm_gateway {", "\t\tllm_ratelimit\n\t\tllm_gateway {", 1)
	}
	cfg, err := adapt(cf)
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, cf)
	}
	truncateLog()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("loading: %v\n%s", err, cf)
	}
	settleReload()
	rlClient.CloseIdleConnections()
	reloadSafeTransport.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

// defaultsKey creates an API key whose defaults route it to the virtual
// key "openai", and a US$usd usage limit on that key alone; it returns
// the key.
func defaultsKey(t *testing.T, usd float64) (name, key string) {
	t.Helper()
	name = "plain-" + uuid.NewString()[:8]
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"`+name+`","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &created)
	as(t, keysAdminKey, "POST", "/policies/usage-limits", fmt.Sprintf(`{"name":"tiny","type":"cost","credit_limit":%g,"workspace_id":"%s",
		"conditions":[{"key":"api_key","value":"%s"}],"group_by":[{"key":"api_key"}]}`, usd, keysWorkspace, name), 200, nil)
	return name, created.Key
}

// TestHardening4KeyDefaultsBudget: clients that send only a base URL and
// their gateway key (a plain OpenAI client's Authorization: Bearer,
// Anthropic's x-api-key), routed by their key's default virtual key,
// reserve on their key's US$0.001 budget as a request naming the route
// in headers does. Each request (max_tokens 1,000 on gpt-4o-mini)
// reserves about US$0.0006, so with every answer held back the first
// reserves that, the second the rest of the budget, and the others are
// refused with the 412: 2 of 20 reach the provider, on a route with
// llm_ratelimit and on one without. Before, the key's defaults were
// invisible to the budget's admission: the provider was unknown, so the
// price, so the reservation nothing, and every request passed (20 of 20
// streams, 10 of 10 Messages).
func TestHardening4KeyDefaultsBudget(t *testing.T) {
	const n = 12
	up := newHeldOpenAI(t)
	ways := []struct {
		name string
		send func(ctx context.Context, key string) (status int, err error)
	}{
		{"chat stream, Authorization Bearer", func(ctx context.Context, key string) (int, error) {
			client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key),
				option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "gpt-4o-mini", MaxTokens: openai.Int(1000),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			for stream.Next() {
			}
			return openaiStatus(stream.Err())
		}},
		{"messages, x-api-key", func(ctx context.Context, key string) (int, error) {
			client := anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(gatewayURL(), "v1")), aoption.WithAPIKey(key),
				aoption.WithMaxRetries(0), aoption.WithHTTPClient(reloadSafeClient))
			p := userText("gpt-4o-mini", "hi")
			p.MaxTokens = 1000
			_, err := client.Messages.New(ctx, p)
			if err == nil {
				return 200, nil
			}
			var e *anthropic.Error
			if asAnthropicError(err, &e) {
				return e.StatusCode, nil
			}
			return 0, err
		}},
		{"responses, Authorization Bearer", func(ctx context.Context, key string) (int, error) {
			client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key),
				option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
			p := textParams("gpt-4o-mini", "hi")
			p.MaxOutputTokens = openai.Int(1000)
			p.Store = openai.Bool(false)
			_, err := client.Responses.New(ctx, p)
			return openaiStatus(err)
		}},
	}
	for _, ratelimit := range []bool{true, false} {
		budgetKeysSite(t, up.URL, ratelimit, "")
		for _, way := range ways {
			t.Run(fmt.Sprintf("%s/llm_ratelimit=%v", way.name, ratelimit), func(t *testing.T) {
				_, key := defaultsKey(t, 0.001)
				release := up.hold()
				defer release()
				var refused atomic.Int32
				codes := make([]int, n)
				var wg sync.WaitGroup
				for i := range codes {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						code, err := way.send(context.Background(), key)
						if err != nil {
							t.Errorf("request %d: %v", i, err)
						}
						codes[i] = code
						if code != 200 {
							refused.Add(1)
						}
					}(i)
				}
				// Every request is decided before any answer (and so any
				// settlement) is let go.
				deadline := time.Now().Add(20 * time.Second)
				for int(up.arrived.Load()+refused.Load()) < n && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				reached := int(up.arrived.Load())
				release()
				wg.Wait()
				admitted := 0
				for _, c := range codes {
					switch c {
					case 200:
						admitted++
					case http.StatusPreconditionFailed:
					default:
						t.Fatalf("statuses %v, want 200 or 412", codes)
					}
				}
				t.Logf("%d of %d admitted, %d reached the provider", admitted, n, reached)
				if admitted != 2 || reached != 2 {
					t.Fatalf("%d of %d admitted, %d reached the provider, against a budget of two reservations; want 2 and 2", admitted, n, reached)
				}
			})
		}
	}
}

// openaiStatus is the status of an openai-go call's outcome.
func openaiStatus(err error) (int, error) {
	if err == nil {
		return 200, nil
	}
	var e *openai.Error
	if asOpenAIError(err, &e) {
		return e.StatusCode, nil
	}
	return 0, err
}
