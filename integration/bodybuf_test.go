package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// largeBodyModel is the model the large-body tests ask for: one the
// catalog has no context window for, so token preflight lets any size
// through to the provider.
const largeBodyModel = "large-body-test-model"

// newHashingOpenAI answers a chat completion whose content is the hex
// SHA-256 of the request body it read, so a client can tell whether the
// bytes the provider got were its own.
func newHashingOpenAI(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		sum := sha256.Sum256(b)
		if gjson.GetBytes(b, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":\"stop\"}]}\n\n", hex.EncodeToString(sum[:]))
			io.WriteString(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, hex.EncodeToString(sum[:]))
	}))
	t.Cleanup(s.Close)
	return s
}

// newRefusingOpenAI answers 500 at once, without reading the body: the
// gateway's transport may still be writing the body when the answer
// arrives and the gateway falls back.
func newRefusingOpenAI(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		w.WriteHeader(500)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestLargeBodiesReachProviderIntact: large bodies, which the gateway
// reads into lent buffers (internal/bodybuf) and reuses once the flight
// and every transport reading one are done, reach the provider byte for
// byte under concurrency, after a fallback from a provider that answered
// before reading the body, with async hooks that read the body after the
// answer was sent, and streamed (sent from the buffer followed by the
// stream_options member the gateway adds). A buffer reused too early
// would send another request's bytes (or garbage) and the hash would
// differ.
func TestLargeBodiesReachProviderIntact(t *testing.T) {
	good := newHashingOpenAI(t)
	bad := newRefusingOpenAI(t)
	hook := newHookServer(t, `{"verdict":true}`)
	close(hook.release)
	loadFresh(t, site{})
	target := func(s *httptest.Server) string {
		return `{"provider":"openai","api_key":"sk-test","custom_host":"` + s.URL + `/v1"}`
	}
	for _, c := range []struct {
		name, config string
		stream       bool
	}{
		{"direct", target(good), false},
		{"streamed", target(good), true},
		{"fallback", `{"strategy":{"mode":"fallback"},"targets":[` + target(bad) + `,` + target(good) + `]}`, false},
		{"async hook", strings.TrimSuffix(target(good), "}") + `,"after_request_hooks":[{"id":"audit","async":true,"checks":[{"id":"default.webhook","parameters":{"webhookURL":"` + hook.URL + `/audit","timeout":20000}}]}]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) { sendHashedBodies(t, c.config, c.stream) })
	}
	// The async hooks saw the bodies too: each webhook call carries the
	// request as JSON (a reused buffer would have garbled some of them).
	// The async pool may drop runs beyond its memory bound, so the calls
	// are counted until they stop coming.
	go func() {
		for range hook.got {
		}
	}()
	last, still := -1, 0
	for deadline := time.Now().Add(30 * time.Second); still < 20 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		hook.mu.Lock()
		n := len(hook.bodies)
		hook.mu.Unlock()
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	garbled := 0
	for _, b := range hook.bodies {
		if !strings.Contains(string(b), `"eventType":"afterRequestHook"`) || !gjson.ValidBytes(b) ||
			!strings.Contains(string(b), `"model":"`+largeBodyModel+`"`) {
			garbled++
		}
	}
	if len(hook.bodies) == 0 || garbled > 0 {
		t.Fatalf("%d of %d async webhook calls got a garbled request", garbled, len(hook.bodies))
	}
}

// sendHashedBodies posts 8 workers × 6 rounds of random 40 KB–1.5 MB chat
// bodies (streamed or not) through the gateway with the x-gateway-config
// config, to a newHashingOpenAI provider, and fails t unless each answer
// is the hash of the body the provider should have got.
func sendHashedBodies(t *testing.T, config string, stream bool) {
	const workers, rounds = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				// 40 KB to 1.5 MB: several buffer classes.
				pad := make([]byte, 40_000+rng.IntN(1_500_000))
				for i := range pad {
					pad[i] = 'a' + byte(rng.IntN(26))
				}
				// A model without a context window in the catalog: these
				// bodies (up to ~500k tokens) are about transport, and token
				// preflight would refuse them for gpt-4o-mini's 128k.
				body := []byte(`{"model":"` + largeBodyModel + `","stream":` + fmt.Sprint(stream) + `,"messages":[{"role":"user","content":"` + string(pad) + `"}]}`)
				sent := body
				if stream {
					// What the provider gets: the gateway asks for
					// the stream's usage.
					sent = append(bytes.TrimSuffix(bytes.Clone(body), []byte("}")), `,"stream_options":{"include_usage":true}}`...)
				}
				sum := sha256.Sum256(sent)
				req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-gateway-api-key", gatewayKey)
				req.Header.Set("x-gateway-config", config)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := gjson.GetBytes(raw, "choices.0.message.content").String()
				if stream {
					got = ""
					for _, line := range strings.Split(string(raw), "\n") {
						if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
							got += gjson.Get(d, "choices.0.delta.content").String()
						}
					}
				}
				if resp.StatusCode != 200 || got != hex.EncodeToString(sum[:]) {
					errs <- fmt.Errorf("status %d, provider hashed %q, want %x: %.200s", resp.StatusCode, got, sum, raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLargeBodiesThroughRatelimitIntact: with llm_ratelimit in front
// reading the body (a tokens policy estimates it), the body is read into
// a lent buffer there and taken over by the gateway (ingress.SetBodyBuf),
// and still reaches the provider byte for byte.
func TestLargeBodiesThroughRatelimitIntact(t *testing.T) {
	good := newHashingOpenAI(t)
	loadRL(t, rlSite{Limit: `
			policy tokens-bodies {
				type tokens
				unit rpm
				value 1000000000
			}`})
	config := `{"provider":"openai","api_key":"sk-test","custom_host":"` + good.URL + `/v1"}`
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) { sendHashedBodies(t, config, stream) })
	}
}
