package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
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

func newHeldOpenAI(t *testing.T) *heldOpenAI { return holdAnswers(newFakeOpenAI(t)) }

// holdAnswers makes f answer as a heldOpenAI.
func holdAnswers(f *fakeOpenAI) *heldOpenAI {
	h := &heldOpenAI{fakeOpenAI: f}
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

// burstHeld sends n chat requests (max_tokens 1,000 on gpt-4o-mini, each
// reserving about US$0.0006) at once through base, spread over bases,
// while up holds the answers, and returns how many were admitted and
// how many reached the provider before any answer was let go.
func burstHeld(t *testing.T, up *heldOpenAI, bases []string, n int, headers ...string) (admitted, reached int) {
	t.Helper()
	body := `{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`
	release := up.hold()
	defer release()
	var refused atomic.Int32
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, raw := rlChat(t, bases[i%len(bases)], gatewayKey, up.URL, body, headers...)
			codes[i] = resp.StatusCode
			if resp.StatusCode != 200 {
				refused.Add(1)
				if resp.StatusCode != http.StatusPreconditionFailed {
					t.Errorf("status %d: %s", resp.StatusCode, raw)
				}
			}
		}(i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for int(up.arrived.Load()+refused.Load()) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	reached = int(up.arrived.Load())
	release()
	wg.Wait()
	for _, c := range codes {
		if c == 200 {
			admitted++
		}
	}
	return admitted, reached
}

// budgetWaitBlock makes a request on a spent budget wait 1 ms at most for
// the reservations in flight, so a held burst is refused, not queued.
const budgetWaitBlock = "\n\t\tbudgets {\n\t\t\tmax_wait 1ms\n\t\t}"

// TestHardening4NewLimitBindsEveryInstance: two gateways on one Redis
// (this process's Caddy, A, and the gateway binary, B). B serves a
// request, so it holds a set of usage limits without the new one, then a
// US$0.001 limit is created through A, and a burst of 50 held requests
// arrives on B at once: at most the two reservations the budget holds
// are admitted, whether B's set was fresh (no reload could bring the
// limit) or B had been idle for 2.5 s (the burst's first request would
// reload it). Before, B enforced a new limit only from its next reload,
// and let every other request of the burst pass meanwhile (2 of 3 bursts
// overspent): the creation now answers once every instance listening
// for change notices has reloaded.
func TestHardening4NewLimitBindsEveryInstance(t *testing.T) {
	requireRedis(t)
	bin := buildGateway(t)
	up := holdAnswers(newFakeOpenAI(t))
	port2 := freePort()
	dir := t.TempDir()
	second := rlSite{Redis: redisBlock(false) + budgetWaitBlock, Storage: filepath.Join(dir, "storage"),
		HTTPPort: port2, AdminPort: freePort(), Log: filepath.Join(dir, "second.log")}
	startGateway(t, bin, dir, second.caddyfile(), port2)
	loadRL(t, rlSite{Redis: redisBlock(false) + budgetWaitBlock})
	baseB := fmt.Sprintf("http://127.0.0.1:%d/v1", port2)
	for _, idle := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprintf("idle %v", idle), func(t *testing.T) {
			tag := uuid.NewString()
			meta := fmt.Sprintf(`{"case":%q}`, tag)
			if resp, raw := rlChat(t, baseB, gatewayKey, up.URL, "", "x-gateway-metadata", meta); resp.StatusCode != 200 {
				t.Fatalf("warm-up request on B: %d %s", resp.StatusCode, raw)
			}
			time.Sleep(idle) // the scenario: B idle behind a load balancer
			limit := `{"name":"burst","type":"cost","credit_limit":0.001,` +
				`"conditions":[{"key":"metadata.case","value":"` + tag + `"}],"group_by":[{"key":"metadata.case"}]}`
			if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", limit); status != 200 {
				t.Fatalf("create on A: %d %v", status, m)
			}
			admitted, reached := burstHeld(t, up, []string{baseB}, 50, "x-gateway-metadata", meta)
			t.Logf("limit created on A, 50 held requests on B: %d admitted, %d reached the provider", admitted, reached)
			if admitted != 2 || reached != 2 {
				t.Fatalf("B admitted %d of 50 (%d reached the provider) right after a two-reservation limit was created on A; want 2",
					admitted, reached)
			}
		})
	}
}

// TestHardening4UsedShowsOvershoot: a request that cost more than its
// budget had left (it reserved the remainder) shows in /v1/usage/me as
// used beyond credit_limit, remaining 0. Before, used stopped at the
// limit and hid the overshoot.
func TestHardening4UsedShowsOvershoot(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	// A budget smaller than one request: the request reserves what is
	// left and is charged what it cost; used says so.
	small := strings.Replace(strings.Replace(tinyBudget, "0.00002", "0.000002", 1), `"value": "*"`, `"value": "second"`, 1)
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", small); status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	resp, raw := rlChat(t, gatewayURL(), rlSecondKey, up.URL, "")
	if resp.StatusCode != 200 {
		t.Fatalf("second key: %d %s", resp.StatusCode, raw)
	}
	var me struct {
		UsageLimits []struct {
			CreditLimit float64 `json:"credit_limit"`
			Used        float64 `json:"used"`
			Remaining   float64 `json:"remaining"`
		} `json:"usage_limits"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		meRaw := call(t, http.MethodGet, "/usage/me", "", 200, nil, "x-gateway-api-key", rlSecondKey)
		if err := json.Unmarshal(meRaw, &me); err != nil {
			t.Fatal(err)
		}
		var lim *struct {
			CreditLimit float64 `json:"credit_limit"`
			Used        float64 `json:"used"`
			Remaining   float64 `json:"remaining"`
		}
		for i := range me.UsageLimits {
			if me.UsageLimits[i].CreditLimit == 0.000002 {
				lim = &me.UsageLimits[i]
			}
		}
		if lim != nil && lim.Used > lim.CreditLimit {
			if lim.Remaining != 0 {
				t.Fatalf("overshot budget: %+v, want remaining 0", *lim)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage/me after a request costing more than the budget: %s, want used above credit_limit 0.000002", meRaw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHardening4NoLimitNoStore: a gateway whose Redis is unreachable
// from the start (a closed port), with no limit declared, serves
// requests, with llm_ratelimit in front and without, in the default
// fail_closed mode: no limit means no store is needed. Before, every
// request was a 503 budget_store_unavailable (or
// rate_limiter_unavailable). A Caddyfile policy still needs its
// counters: with one, fail_closed answers 503.
func TestHardening4NoLimitNoStore(t *testing.T) {
	up := newFakeOpenAI(t)
	dead := fmt.Sprintf("127.0.0.1:%d", freePort()) // nothing listens there
	policy := `
			policy always-` + uuid.NewString() + ` {
				type requests
				unit rpm
				value 100
			}`
	for _, tc := range []struct {
		name       string
		site       rlSite
		wantStatus int
	}{
		{"llm_ratelimit, no policy", rlSite{}, 200},
		{"no llm_ratelimit", rlSite{NoLimiter: true}, 200},
		{"a Caddyfile policy", rlSite{Limit: policy}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.site.Redis = "redis " + dead + " {\n\t\t\tfail_closed\n\t\t}"
			loadRL(t, tc.site)
			for i := 0; i < 3; i++ {
				resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("request %d with Redis unreachable: %d %s, want %d", i, resp.StatusCode, raw, tc.wantStatus)
				}
			}
		})
	}
}
