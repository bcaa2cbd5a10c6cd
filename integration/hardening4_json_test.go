package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
)

// Issue 34, "one strict JSON reading": a body naming a member twice would
// be judged by the gateway's first-wins reading and served by the
// provider's last-wins one ({"model":"gpt-4o-mini","model":"o3"} from a
// key allowed only gpt-4o-mini served by o3). Every body the gateway
// judges and forwards is refused instead, with a 400 naming the member,
// before any provider sees it.

// smuggle is the duplicate model body of each way in, as raw text.
const (
	smuggleChat       = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"model":"o3"}`
	smuggleEscaped    = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"mod\u0065l":"o3"}`
	smuggleCompletion = `{"model":"gpt-4o-mini","prompt":"hi","model":"o3"}`
	smuggleEmbeddings = `{"model":"text-embedding-3-small","input":"hi","model":"o3"}`
	smuggleResponses  = `{"model":"gpt-4o-mini","input":"hi","model":"o3"}`
	smuggleMessages   = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"model":"o3"}`
	smuggleProxy      = `{"model":"omni-moderation-latest","input":"hi","model":"o3"}`
	smuggleNested     = `{"model":"gpt-4o-mini","messages":[{"role":"user","role":"system","content":"hi"}]}`
)

// paramOf returns the status and the error envelope's param and message.
func paramOf(t *testing.T, raw []byte) (param, message string) {
	t.Helper()
	if !gjson.ValidBytes(raw) || !gjson.GetBytes(raw, "error.message").Exists() {
		t.Fatalf("not an error envelope: %s", raw)
	}
	return gjson.GetBytes(raw, "error.param").String(), gjson.GetBytes(raw, "error.message").String()
}

// TestStrictJSONDuplicateModel: the duplicate model smuggle through every
// way in (chat, completions, embeddings, Responses, Messages, a path
// passed through, prompt completions' variables) is a 400 naming the
// member, and the provider never receives the body.
func TestStrictJSONDuplicateModel(t *testing.T) {
	up := newCountingProvider(t)
	loadSite(t, site{})
	route := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-test-provider"}
	cases := []struct {
		name, path, body, contentType, param string
	}{
		{"chat", "/chat/completions", smuggleChat, "application/json", "model"},
		{"chat, escaped name", "/chat/completions", smuggleEscaped, "application/json", "model"},
		{"chat, nested member", "/chat/completions", smuggleNested, "application/json", "messages[0].role"},
		{"completions", "/completions", smuggleCompletion, "application/json", "model"},
		{"embeddings", "/embeddings", smuggleEmbeddings, "application/json", "model"},
		{"responses", "/responses", smuggleResponses, "application/json", "model"},
		{"messages", "/messages", smuggleMessages, "application/json", "model"},
		{"pass-through", "/moderations", smuggleProxy, "application/json", "model"},
		{"pass-through, JSON sent as text", "/moderations", smuggleProxy, "text/plain", "model"},
		{"prompt completions", "/prompts/any-prompt/completions", `{"variables":{"q":"a"},"variables":{"q":"b"}}`, "application/json", "variables"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := bcall(t, http.MethodPost, gatewayURL(), tc.path, []byte(tc.body), tc.contentType, route...)
			param, msg := paramOf(t, raw)
			if tc.path == "/messages" {
				// Anthropic's envelope has no param: the message names
				// the member.
				param = tc.param
			}
			if status != 400 || param != tc.param || !strings.Contains(msg, `"`+tc.param+`"`) {
				t.Fatalf("got %d param %q: %s", status, param, raw)
			}
		})
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the provider received %d refused bodies", n)
	}
	// The same ways with the member once reach the provider.
	status, raw := bcall(t, http.MethodPost, gatewayURL(), "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), "application/json", route...)
	if status != 200 || up.calls.Load() != 1 {
		t.Fatalf("a plain chat: %d (%d calls) %s", status, up.calls.Load(), raw)
	}
	// A pass-through body that is not JSON is not judged as JSON.
	status, _ = bcall(t, http.MethodPost, gatewayURL(), "/moderations", []byte(`{not json`), "text/plain", route...)
	if status == 400 {
		t.Fatalf("a non-JSON pass-through body was refused")
	}
}

// TestStrictJSONBatchLine: in a managed batch, a line whose body names
// model twice fails that line (a 400 naming "model" in the error file)
// and is never sent; the batch's other line runs.
func TestStrictJSONBatchLine(t *testing.T) {
	up := newCountingProvider(t)
	loadSite(t, site{})
	route := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-test-provider"}
	lines := `{"custom_id":"good","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n" +
		`{"custom_id":"smuggle","method":"POST","url":"/v1/chat/completions","body":` + smuggleChat + `}` + "\n"
	id := mustCreateBatch(t, gatewayURL(), uploadBatchFile(t, gatewayURL(), []byte(lines)), route...)
	b := waitBatchDone(t, gatewayURL(), id, route...)
	out, errs := checkCountsMatchFiles(t, gatewayURL(), b)
	if b.Get("status").Str != "completed" || len(out) != 1 || len(errs) != 1 {
		t.Fatalf("batch %s: %d output, %d error lines", b.Raw, len(out), len(errs))
	}
	e := errs[0]
	if e.Get("custom_id").Str != "smuggle" || e.Get("response.status_code").Int() != 400 || e.Get("response.body.error.param").Str != "model" {
		t.Fatalf("error line %s", e.Raw)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("the provider received %d calls, want the good line's only", n)
	}
}

// countingReader yields n bytes of filler and counts what it gave.
type countingReader struct {
	left int
	read atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	if r.read.Load() == 0 {
		p[0] = '{'
	}
	r.left -= n
	r.read.Add(int64(n))
	return n, nil
}

// TestStrictJSONControlPlaneBounds: an authenticated control-plane body of
// 30 MB is refused 413 in the envelope, before it is read when its
// Content-Length says so and once past the bound otherwise; a body naming
// a member twice is a 400 naming it.
func TestStrictJSONControlPlaneBounds(t *testing.T) {
	loadSite(t, site{Gateway: "max_request_body 64MB"})
	const size = 30 << 20
	for _, declared := range []bool{true, false} {
		body := &countingReader{left: size}
		req, _ := http.NewRequest(http.MethodPost, gatewayURL()+"/policies/rate-limits", body)
		if declared {
			req.ContentLength = size
		} else {
			req.ContentLength = -1 // chunked
		}
		req.Header.Set("x-gateway-api-key", gatewayKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("declared=%v: %v", declared, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || gjson.GetBytes(raw, "error.code").Str != "request_too_large" {
			t.Fatalf("declared=%v: %d %s", declared, resp.StatusCode, raw)
		}
		// The gateway stopped reading: what the client managed to send
		// is bounded by the limit and socket buffers, not the body.
		if n := body.read.Load(); n >= size/2 {
			t.Fatalf("declared=%v: the client sent %d of %d bytes", declared, n, size)
		}
	}
	// The bound is the control plane's: an inference body of 2 MiB is
	// read (and routed; no provider is named, so a 400 of routing).
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`
	status, raw := bcall(t, http.MethodPost, gatewayURL(), "/chat/completions", []byte(big), "application/json")
	if status == 413 {
		t.Fatalf("a 2 MiB chat body was refused: %s", raw)
	}
	status, raw = bcall(t, http.MethodPost, gatewayURL(), "/policies/rate-limits",
		[]byte(`{"name":"a","type":"requests","unit":"rpm","value":10,"value":1000000}`), "application/json")
	if param, _ := paramOf(t, raw); status != 400 || param != "value" {
		t.Fatalf("a repeated member: %d %s", status, raw)
	}
}

// loadDefaultEgressKeysSite loads a keys site whose route keeps the
// default egress policy (public addresses only).
func loadDefaultEgressKeysSite(t *testing.T, s *keysSite) {
	t.Helper()
	newHTTPPort()
	cf := strings.Replace(s.caddyfile(), "custom_host_allow loopback", "max_request_body 1MB", 1)
	cfg, err := adapt(cf)
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, cf)
	}
	truncateLog()
	err = caddy.Load(cfg, true)
	http.DefaultClient.CloseIdleConnections()
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
}

// TestStrictJSONVertexTokenURIFromAPIRecords: a virtual key or a config
// saved through the API is client input, so the token_uri of its Vertex
// service account passes the route's egress policy: on a route with the
// default policy a loopback token_uri is refused (the same 400 as a
// refused custom host) and never dialled.
func TestStrictJSONVertexTokenURIFromAPIRecords(t *testing.T) {
	open, accepted := acceptCounter(t)
	raw, _ := newServiceAccount(t, "p")
	var sa map[string]any
	if err := json.Unmarshal(raw, &sa); err != nil {
		t.Fatal(err)
	}
	sa["token_uri"] = "http://127.0.0.1:" + open + "/token"
	loadDefaultEgressKeysSite(t, newKeysSite(t, ""))

	vkBody, _ := json.Marshal(map[string]any{"name": "Vertex loopback", "provider": "vertex-ai", "cloudc_region": "europe-west4", "cloudc_service_account_json": sa})
	var vk struct{ Slug string }
	as(t, gatewayKey, "POST", "/virtual-keys", string(vkBody), 200, &vk)
	cfgBody, _ := json.Marshal(map[string]any{"name": "Vertex loopback", "config": map[string]any{"provider": "vertex-ai", "cloudc_region": "europe-west4", "cloudc_service_account_json": sa}})
	var cfg struct{ Slug string }
	as(t, gatewayKey, "POST", "/configs", string(cfgBody), 200, &cfg)
	if vk.Slug == "" || cfg.Slug == "" {
		t.Fatalf("created %+v %+v", vk, cfg)
	}
	chat := []byte(`{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`)
	for _, h := range [][]string{
		{"x-gateway-virtual-key", vk.Slug},
		{"x-gateway-config", cfg.Slug},
		{"x-gateway-config", `{"virtual_key":"` + vk.Slug + `"}`},
	} {
		t.Run(h[0]+" "+h[1], func(t *testing.T) {
			resp, body := do(t, "POST", "/chat/completions", chat, h...)
			r := refusalOf(t, resp.StatusCode, body)
			if r.status != 400 || r.code != "custom_host_not_allowed" {
				t.Fatalf("got %+v, want 400 custom_host_not_allowed", r)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback token_uri was dialled %d times", n)
	}
}
