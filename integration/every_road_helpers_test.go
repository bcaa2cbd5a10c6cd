// Helpers of the "every road" table test (every_road_test.go): the site
// every cell runs on, the ways in (how a request of each kind is sent
// and what came back), the ways of routing (which headers, or which key
// defaults), and the ledger lookups the rules read.

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Models of the every-road cells: each cell's key is allowed roadModel and
// roadEmbedModel only; roadDenied (roadEmbedDenied for embeddings) is the
// model outside its allow-list.
const (
	roadModel       = "gpt-4o-mini"
	roadDenied      = "gpt-4o"
	roadEmbedModel  = "text-embedding-3-small"
	roadEmbedDenied = "text-embedding-3-large"
	// roadForbidden is the word the input guardrail of road-in denies.
	roadForbidden = "FORBIDDEN"
)

// roadEnv is the one gateway every cell runs on and its fake provider.
type roadEnv struct {
	up *fakeOpenAI
	mu sync.Mutex
	// burst, while set, holds each provider call (see holdBurst).
	burst *roadBurst
}

// roadBurst holds the provider's answers of a burst of n requests until
// all n arrived, or roadBurstWait after each arrived, so a gateway that
// admits the whole burst (reserving nothing) has all of it in flight
// before any settles. The wait only makes such a gateway's overspend
// show every time; a gateway that reserves is never judged on time: it
// admits what its reservations allow, however the calls interleave.
type roadBurst struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{}
}

const roadBurstWait = 50 * time.Millisecond

// holdBurst starts holding the provider's answers for a burst of n; the
// returned func ends it.
func (e *roadEnv) holdBurst(n int) func() {
	e.mu.Lock()
	e.burst = &roadBurst{n: n, all: make(chan struct{})}
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.burst = nil
		e.mu.Unlock()
	}
}

func (e *roadEnv) hold() {
	e.mu.Lock()
	b := e.burst
	e.mu.Unlock()
	if b == nil {
		return
	}
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(roadBurstWait):
	}
}

// roadUsage is what the fake reports per request of each operation.
type roadUsage struct{ in, out int64 }

// newRoadEnv loads the site: the keys API (an organisation admin), an
// SQLite ledger, a Caddyfile virtual key road-vk on the fake OpenAI,
// saved configs road-plain, road-in (an input guardrail denying
// roadForbidden) and road-out (an output guardrail denying every
// answer), a prompt file "road", llm_ratelimit in front of llm_gateway
// and the console under /console/.
func newRoadEnv(t *testing.T) *roadEnv {
	t.Helper()
	e := &roadEnv{up: newFakeOpenAI(t)}
	e.up.Hook = e.provider
	s := newKeysSite(t, "")
	prompts := t.TempDir()
	prompt := `{"name":"Road","slug":"road","published":1,"versions":[{"messages":[{"role":"user","content":"{{q}}"}],"model":"` + roadModel + `","hyperparameters":{"max_tokens":16}}]}`
	if err := os.WriteFile(filepath.Join(prompts, "road.json"), []byte(prompt), 0o600); err != nil {
		t.Fatal(err)
	}
	// A fallback of two targets, so a key defaulting to a config has its
	// uploads kept and its batches run by the gateway (docs/batches.md).
	target := `"strategy":{"mode":"fallback"},"targets":[{"virtual_key":"road-vk"},{"virtual_key":"road-vk"}]`
	s.LLM = fmt.Sprintf(`ledger %q
		prompts %s
		virtual_key road-vk {
			provider openai
			api_key sk-test-provider
			custom_host %s
		}
		config road-plain `+"`{%s}`"+`
		config road-in `+"`{%s,\"input_guardrails\":[{\"default.regexMatch\":{\"rule\":\"(?i)%s\",\"not\":true},\"deny\":true}]}`"+`
		config road-out `+"`{%s,\"output_guardrails\":[{\"default.regexMatch\":{\"rule\":\".\",\"not\":true},\"deny\":true}]}`",
		filepath.Join(t.TempDir(), "ledger.db"), prompts, e.up.URL, target, target, roadForbidden, target)
	newHTTPPort()
	cf := s.caddyfile()
	cf = strings.Replace(cf, "\thandle /v1/* {", "\thandle_path /console/* {\n\t\tllm_console\n\t}\n\thandle /v1/* {", 1)
	cf = strings.Replace(cf, "\t\tllm_gateway {", "\t\tllm_ratelimit\n\t\tllm_gateway {", 1)
	loadCaddyfile(t, cf)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	return e
}

// provider answers what the default fake does not: native Responses
// calls, and completions and embeddings with usage large enough that a
// budget of a few requests is several micro-dollars (well above the
// nano-dollar a budget counts in). Anything else, or a wrong provider key, falls through to the
// fake's own handling.
func (e *roadEnv) provider(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get("Authorization") != "Bearer sk-test-provider" {
		return false
	}
	e.hold()
	model := gjson.GetBytes(body, "model").Str // gjson, like a provider, reads the last member
	switch r.URL.Path {
	case "/v1/responses":
		writeJSON(w, 200, []byte(fmt.Sprintf(`{"id":"resp_road","object":"response","created_at":1700000000,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_road","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}}`, model)))
	case "/v1/completions":
		writeJSON(w, 200, []byte(fmt.Sprintf(`{"id":"cmpl-road","object":"text_completion","created":1700000000,"model":%q,"choices":[{"text":" world","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":10,"total_tokens":30}}`, model)))
	case "/v1/embeddings":
		writeJSON(w, 200, []byte(fmt.Sprintf(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2,0.3]}],"model":%q,"usage":{"prompt_tokens":500,"total_tokens":500}}`, model)))
	default:
		return false
	}
	return true
}

// servedSince reports whether the provider received a request for model
// (read as a provider does: the last member wins) among its requests
// from the index since on.
func (e *roadEnv) servedSince(since int, model string) bool {
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	for _, s := range e.up.seen[min(since, len(e.up.seen)):] {
		var m struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(s.Body, &m) == nil && m.Model == model {
			return true
		}
	}
	return false
}

// roadCell is one cell's gateway key and how its requests are routed.
type roadCell struct {
	name, key string
	route     *roadRoute
	config    string // the saved config of the config routes
	console   *consoleClient
}

// roadReq is one request of a cell: its model, its user text, and, when
// dup is set, a second "model" member naming dup after the first.
type roadReq struct {
	model, text, dup string
}

// outcome is what one request (or batch line) got.
type outcome struct {
	status int
	code   string // the error's code (Anthropic's error.type on Messages)
	body   string
	trace  string
	cost   string
}

// roadRoute is a way of routing: the headers of a request of cell c, and
// the defaults its key is created with.
type roadRoute struct {
	name string
	// headers are the credential and routing headers; creds the
	// credential alone (file uploads, polling).
	headers func(e *roadEnv, c *roadCell) []string
	creds   func(c *roadCell) []string
	// defaults is the key's "defaults" member, given the saved config.
	defaults func(config string) string
	// form is the playground's virtual key and config fields.
	form func(c *roadCell) (vk, config string)
}

func gatewayCreds(c *roadCell) []string { return []string{"x-gateway-api-key", c.key} }
func noDefaults(string) string          { return "" }

var roadRoutes = []*roadRoute{
	{name: "provider", creds: gatewayCreds, defaults: noDefaults,
		headers: func(e *roadEnv, c *roadCell) []string {
			return []string{"x-gateway-api-key", c.key, "x-gateway-provider", "openai", "x-gateway-custom-host", e.up.URL, "Authorization", "Bearer sk-test-provider"}
		}},
	{name: "virtual-key", creds: gatewayCreds, defaults: noDefaults,
		headers: func(_ *roadEnv, c *roadCell) []string {
			return []string{"x-gateway-api-key", c.key, "x-gateway-virtual-key", "road-vk"}
		},
		form: func(*roadCell) (string, string) { return "road-vk", "" }},
	{name: "config", creds: gatewayCreds, defaults: noDefaults,
		headers: func(_ *roadEnv, c *roadCell) []string {
			return []string{"x-gateway-api-key", c.key, "x-gateway-config", c.config}
		},
		form: func(c *roadCell) (string, string) { return "", c.config }},
	// Key defaults: a plain client's one key, no x-gateway-* header.
	{name: "key-vk-bearer", defaults: func(string) string { return `"defaults":{"virtual_key":"road-vk"},` },
		creds:   func(c *roadCell) []string { return []string{"Authorization", "Bearer " + c.key} },
		headers: func(_ *roadEnv, c *roadCell) []string { return []string{"Authorization", "Bearer " + c.key} },
		form:    func(*roadCell) (string, string) { return "", "" }},
	{name: "key-config-x-api-key", defaults: func(cfg string) string { return `"defaults":{"config_id":"` + cfg + `"},` },
		creds:   func(c *roadCell) []string { return []string{"x-api-key", c.key} },
		headers: func(_ *roadEnv, c *roadCell) []string { return []string{"x-api-key", c.key} },
		form:    func(*roadCell) (string, string) { return "", "" }},
}

// roadWay is a way in: how a cell's requests are sent, the model its
// rules ask for and refuse, and the usage the fake reports for one.
type roadWay struct {
	name          string
	model, denied string
	usage         roadUsage
	// costHeader: its answer carries x-gateway-cost (a held, non-stream
	// answer: docs/providers.md, Cost).
	costHeader bool
	send       func(t *testing.T, e *roadEnv, c *roadCell, reqs []roadReq, parallel bool) []outcome
}

// jsonBody is the body of an HTTP way for r, with the duplicate model
// member when asked.
func jsonBody(format string, r roadReq) []byte {
	model := fmt.Sprintf("%q", r.model)
	if r.dup != "" {
		model += fmt.Sprintf(`,"model":%q`, r.dup)
	}
	text, _ := json.Marshal(r.text)
	return []byte(fmt.Sprintf(format, model, text))
}

// httpWay sends each request as one POST of path with the body format
// (its %s are the model member(s) and the JSON-quoted text).
func httpWay(path, format string, extra ...string) func(*testing.T, *roadEnv, *roadCell, []roadReq, bool) []outcome {
	return func(t *testing.T, e *roadEnv, c *roadCell, reqs []roadReq, parallel bool) []outcome {
		out := make([]outcome, len(reqs))
		one := func(i int) {
			h := append(c.route.headers(e, c), extra...)
			resp, raw := rawDo(t, gatewayURL(), http.MethodPost, path, jsonBody(format, reqs[i]), h...)
			code := gjson.GetBytes(raw, "error.code").Str
			if gjson.GetBytes(raw, "type").Str == "error" { // Anthropic's shape
				code = gjson.GetBytes(raw, "error.type").Str
			}
			out[i] = outcome{status: resp.StatusCode, code: code, body: string(raw),
				trace: resp.Header.Get("x-gateway-trace-id"), cost: resp.Header.Get("x-gateway-cost")}
		}
		runAll(len(reqs), parallel, one)
		return out
	}
}

func runAll(n int, parallel bool, one func(int)) {
	if !parallel {
		for i := range n {
			one(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); one(i) }()
	}
	wg.Wait()
}

// Bodies ask for roadMaxTokens output tokens, so a budget of a few
// requests' cost is less than one request's reservation: a gateway that
// reserves admits one request at a time, on what the budget has left,
// and the spend after the burst is exact (see checkBudget).
const (
	roadMaxTokens = "4096"
	// chatFormat is a chat completion's body (also each batch line's).
	chatFormat = `{"model":%s,"max_tokens":` + roadMaxTokens + `,"messages":[{"role":"user","content":%s}]}`
)

// embedPad makes an embedding input whose reservation (body bytes / 4:
// embeddings reserve their prompt only) is more than 2.5 times the 500
// tokens the fake reports.
var embedPad = strings.Repeat("pad ", 1600)

// chatStreamFormat is a streamed chat completion's (and Messages') body.
const chatStreamFormat = `{"model":%s,"stream":true,"max_tokens":` + roadMaxTokens + `,"messages":[{"role":"user","content":%s}]}`

// The ways in. Messages go to an OpenAI target, so they are translated
// (native Messages targets are Anthropic's, another provider fake); a
// native Responses answer is passed through unheld, without a cost
// header; streams carry none either.
var roadWays = []*roadWay{
	{name: "chat", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, costHeader: true, send: httpWay("/chat/completions", chatFormat)},
	{name: "chat-stream", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, send: httpWay("/chat/completions", chatStreamFormat)},
	{name: "completions", model: roadModel, denied: roadDenied, usage: roadUsage{20, 10}, costHeader: true,
		send: httpWay("/completions", `{"model":%s,"max_tokens":`+roadMaxTokens+`,"prompt":%s}`)},
	{name: "embeddings", model: roadEmbedModel, denied: roadEmbedDenied, usage: roadUsage{500, 0}, costHeader: true,
		send: httpWay("/embeddings", `{"model":%s,"input":[%s,"`+embedPad+`"]}`)},
	{name: "responses", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3},
		send: httpWay("/responses", `{"model":%s,"max_output_tokens":`+roadMaxTokens+`,"input":%s}`)},
	{name: "messages", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, costHeader: true,
		send: httpWay("/messages", chatFormat, "anthropic-version", "2023-06-01")},
	{name: "messages-stream", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3},
		send: httpWay("/messages", chatStreamFormat, "anthropic-version", "2023-06-01")},
	{name: "batch", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, send: batchWay},
	{name: "prompt", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, costHeader: true,
		send: httpWay("/prompts/road/completions", `{"model":%s,"max_tokens":`+roadMaxTokens+`,"variables":{"q":%s}}`)},
	{name: "playground", model: roadModel, denied: roadDenied, usage: roadUsage{9, 3}, costHeader: true, send: playgroundWay},
}

// batchWay sends the requests as the lines of one managed batch: the
// input uploaded with the credential alone (so the gateway keeps it),
// the batch created with the route's headers, and each line's outcome
// read from the output or error file.
func batchWay(t *testing.T, e *roadEnv, c *roadCell, reqs []roadReq, _ bool) []outcome {
	var in bytes.Buffer
	for i, r := range reqs {
		fmt.Fprintf(&in, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, jsonBody(chatFormat, r))
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(in.Bytes())
	_ = mw.Close()
	creds := c.route.creds(c)
	resp, raw := rawDo(t, gatewayURL(), http.MethodPost, "/files", form.Bytes(), append([]string{"Content-Type", mw.FormDataContentType()}, creds...)...)
	file := gjson.GetBytes(raw, "id").Str
	if resp.StatusCode != 200 || file == "" {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	resp, raw = rawDo(t, gatewayURL(), http.MethodPost, "/batches",
		[]byte(`{"input_file_id":"`+file+`","endpoint":"/v1/chat/completions","completion_window":"immediate"}`), c.route.headers(e, c)...)
	id := gjson.GetBytes(raw, "id").Str
	if resp.StatusCode != 200 || id == "" {
		// The batch itself was refused: every line has its answer.
		out := make([]outcome, len(reqs))
		for i := range out {
			out[i] = outcome{status: resp.StatusCode, code: gjson.GetBytes(raw, "error.code").Str, body: string(raw)}
		}
		return out
	}
	var b gjson.Result
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, raw := rawDo(t, gatewayURL(), http.MethodGet, "/batches/"+id, nil, creds...)
		b = gjson.ParseBytes(raw)
		if s := b.Get("status").Str; s == "completed" || s == "failed" || s == "cancelled" || s == "expired" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s stuck: %s", id, raw)
		}
	}
	byID := map[string]outcome{}
	for _, f := range []string{"output_file_id", "error_file_id"} {
		if b.Get(f).Str == "" {
			continue
		}
		_, raw := rawDo(t, gatewayURL(), http.MethodGet, "/files/"+b.Get(f).Str+"/content", nil, creds...)
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			line := gjson.Parse(l)
			o := outcome{status: int(line.Get("response.status_code").Int()), body: l,
				code: line.Get("response.body.error.code").Str}
			if o.code == "" {
				o.code = line.Get("error.code").Str
			}
			byID[line.Get("custom_id").Str] = o
		}
	}
	out := make([]outcome, len(reqs))
	for i := range reqs {
		o, ok := byID[fmt.Sprintf("l%d", i)]
		if !ok {
			o = outcome{body: "no result line; batch " + b.Raw}
		}
		out[i] = o
	}
	return out
}

var (
	playStatus = regexp.MustCompile(`id="answer-status">(\d+)<`)
	playTrace  = regexp.MustCompile(`id="answer-trace">([^<]+)<`)
	playCost   = regexp.MustCompile(`· cost ([0-9.]+) USD`)
	playCode   = regexp.MustCompile(`\d{3} ([a-z_]+): `)
)

// playgroundWay signs the cell's key into the console (once) and posts
// each request through the playground form, reading the answer card.
func playgroundWay(t *testing.T, _ *roadEnv, c *roadCell, reqs []roadReq, parallel bool) []outcome {
	if c.console == nil {
		c.console = newConsoleClient(t)
		if code, body := c.console.send("POST", "/signin", url.Values{"key": {c.key}}); code != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", code, body)
		}
		if code, _ := c.console.send("GET", "/playground", nil); code != 200 || c.console.csrf == "" {
			t.Fatalf("playground page: %d", code)
		}
	}
	vk, cfg := c.route.form(c)
	out := make([]outcome, len(reqs))
	runAll(len(reqs), parallel, func(i int) {
		form := url.Values{"csrf": {c.console.csrf}, "model": {reqs[i].model}, "message": {reqs[i].text}, "virtual_key": {vk}, "config": {cfg}}
		req, _ := http.NewRequest("POST", consoleURL()+"/playground", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.console.c.Do(req)
		if err != nil {
			t.Errorf("playground: %v", err)
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(raw)
		o := outcome{body: page}
		if m := playStatus.FindStringSubmatch(page); m != nil {
			fmt.Sscan(m[1], &o.status)
		}
		if m := playTrace.FindStringSubmatch(page); m != nil {
			o.trace = m[1]
		}
		if m := playCost.FindStringSubmatch(page); m != nil {
			o.cost = m[1]
		}
		if m := playCode.FindStringSubmatch(page); m != nil && o.status >= 400 {
			o.code = m[1]
		}
		out[i] = o
	})
	return out
}

// roadRecord is a ledger record as GET /v1/logs answers it.
type roadRecord struct {
	APIKey   string `json:"api_key"`
	Model    string `json:"model"`
	Status   int    `json:"status"`
	TraceID  string `json:"trace_id"`
	In       int64  `json:"input_tokens"`
	Out      int64  `json:"output_tokens"`
	CostNano int64  `json:"cost_nano_usd"`
	Known    bool   `json:"cost_known"`
	BatchID  string `json:"batch_id"`
	Provider string `json:"provider"`
}

// recordsOf returns the ledger records of the key named name, read by
// the organisation admin: for the batch way its lines' only (the upload
// and the polling are records of their own).
func recordsOf(t *testing.T, name string, w *roadWay) []roadRecord {
	t.Helper()
	syncLedger(t)
	var logs struct {
		Data []roadRecord `json:"data"`
	}
	if code := getJSON(t, "/logs?page_size=100&api_key_ids="+url.QueryEscape(name), keysAdminKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	if w.name != "batch" {
		return logs.Data
	}
	var lines []roadRecord
	for _, r := range logs.Data {
		if r.BatchID != "" {
			lines = append(lines, r)
		}
	}
	return lines
}
