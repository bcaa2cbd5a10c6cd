package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFallback(t *testing.T) {
	a, b := newScripted(t, reply{status: 503}), newScripted(t)
	loadFresh(t, site{})
	tests := []struct {
		name     string
		strategy string
		status   int
		index    string
		attempts string
	}{
		{"any non-2xx without a list", `{"mode":"fallback"}`, 200, "config.targets[1]",
			"config.targets[0]:fallback:503 config.targets[1]:ok:200"},
		{"a listed status", `{"mode":"fallback","on_status_codes":[429,503]}`, 200, "config.targets[1]",
			"config.targets[0]:fallback:503 config.targets[1]:ok:200"},
		{"an unlisted status is returned", `{"mode":"fallback","on_status_codes":[429]}`, 503, "config.targets[0]",
			"config.targets[0]:error:503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := `{"strategy":` + tt.strategy + `,"targets":[` + target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]}`
			resp, raw := chat(t, cfg)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			wantHeaders(t, resp, "x-gateway-last-used-option-index", tt.index, "x-gateway-provider", "openai",
				"x-gateway-retry-attempt-count", "0", "x-gateway-cache-status", "DISABLED")
			if tt.status == 503 && (resp.Header.Get("x-gateway-error") != "" || !strings.Contains(string(raw), "scripted 503")) {
				t.Fatalf("the provider's own failure must pass through: %s", raw)
			}
			if got := lastAttempts(t); got != tt.attempts {
				t.Fatalf("attempts %s, want %s", got, tt.attempts)
			}
		})
	}
}

func TestFallbackAllFailReturnsLast(t *testing.T) {
	a := newScripted(t, reply{status: 500})
	b := newScripted(t, reply{status: 429, body: `{"error":{"message":"slow down, says b","type":"rate_limit","param":null,"code":null}}`})
	loadFresh(t, site{})
	resp, raw := chat(t, `{"strategy":{"mode":"fallback"},"targets":[`+target(a.fakeOpenAI, "")+`,`+target(b.fakeOpenAI, "")+`]}`)
	if resp.StatusCode != 429 || !strings.Contains(string(raw), "slow down, says b") {
		t.Fatalf("want the last target's answer, got %d %s", resp.StatusCode, raw)
	}
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[1]")
}

func TestFallbackOnTimeoutAndUnreachable(t *testing.T) {
	slow, b := newScripted(t, reply{hang: true}), newScripted(t)
	loadFresh(t, site{})
	dead := `{"provider":"openai","api_key":"sk-test-provider","custom_host":"http://127.0.0.1:` + itoa(freePort()) + `"}`
	cfg := `{"strategy":{"mode":"fallback"},"targets":[` + target(slow.fakeOpenAI, `"request_timeout":100`) + `,` + dead + `,` + target(b.fakeOpenAI, "") + `]}`
	resp, raw := chat(t, cfg)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[2]")
	if got := lastAttempts(t); got != "config.targets[0]:timeout:408 config.targets[1]:unreachable:502 config.targets[2]:ok:200" {
		t.Fatalf("attempts %s", got)
	}
}

func TestNestedFallbackInsideLoadBalance(t *testing.T) {
	a, b, c := newScripted(t, reply{status: 502}), newScripted(t), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"loadbalance"},"targets":[
		{"strategy":{"mode":"fallback"},"weight":1,"targets":[` + target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]},
		` + target(c.fakeOpenAI, `"weight":0`) + `]}`
	for range 5 {
		resp, raw := chat(t, cfg)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[0].targets[1]")
	}
	if a.count() != 5 || b.count() != 5 || c.count() != 0 {
		t.Fatalf("hits a=%d b=%d c=%d (the zero-weight target must never be chosen)", a.count(), b.count(), c.count())
	}
}

func TestLoadBalanceWeights(t *testing.T) {
	a, b := newScripted(t), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"loadbalance"},"targets":[` + target(a.fakeOpenAI, `"weight":1`) + `,` + target(b.fakeOpenAI, `"weight":1`) + `]}`
	const n = 200
	for range n {
		if resp, raw := chat(t, cfg); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
	}
	// Equal weights: each side's count is binomial(200, 0.5); 60..140 is
	// more than 5.6 standard deviations wide, so this never flakes, yet
	// catches a balancer that always picks one side.
	if a.count() < 60 || b.count() < 60 || a.count()+b.count() != n {
		t.Fatalf("a=%d b=%d", a.count(), b.count())
	}
}

func TestConditionalRouting(t *testing.T) {
	pro, free, gpt := newScripted(t), newScripted(t), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"conditional","conditions":[
			{"query":{"$and":[{"metadata.user.plan":{"$in":["pro","team"]}},{"params.max_tokens":{"$gte":100}}]},"then":"pro"},
			{"query":{"params.model":{"$regex":"^gpt-4o"},"url.pathname":{"$eq":"/v1/chat/completions"}},"then":"gpt"}],
		"default":"free"},
		"targets":[` + target(pro.fakeOpenAI, `"name":"pro"`) + `,` + target(free.fakeOpenAI, `"name":"free"`) + `,` + target(gpt.fakeOpenAI, `"name":"gpt"`) + `]}`
	tests := []struct {
		name, body, meta, index string
	}{
		{"nested metadata and params", `{"model":"x","max_tokens":200,"messages":[]}`, `{"user":{"plan":"team"}}`, "config.targets[0]"},
		{"first condition fails on params", `{"model":"x","max_tokens":50,"messages":[]}`, `{"user":{"plan":"pro"}}`, "config.targets[1]"},
		{"regex and path", `{"model":"gpt-4o-mini","messages":[]}`, ``, "config.targets[2]"},
		{"default", `{"model":"claude","messages":[]}`, `{"user":{"plan":"free"}}`, "config.targets[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := []string{"x-gateway-config", compactJSON(t, cfg)}
			if tt.meta != "" {
				h = append(h, "x-gateway-metadata", tt.meta)
			}
			resp, raw := do(t, "POST", "/chat/completions", []byte(tt.body), h...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			wantHeaders(t, resp, "x-gateway-last-used-option-index", tt.index)
		})
	}

	bad := strings.Replace(cfg, `"$regex"`, `"$like"`, 1)
	resp, raw := chat(t, bad)
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 400, "invalid_request_error")
	if !strings.Contains(string(raw), `config.strategy.conditions[1].query`) || !strings.Contains(string(raw), `unsupported operator \"$like\"`) {
		t.Fatalf("the 400 must name the condition and the operator: %s", raw)
	}
	bad = strings.Replace(cfg, `"then":"gpt"`, `"then":"gtp"`, 1)
	resp, raw = chat(t, bad)
	if resp.StatusCode != 400 || !strings.Contains(string(raw), `names target \"gtp\"`) {
		t.Fatalf("want a 400 naming the unknown target: %d %s", resp.StatusCode, raw)
	}
}

func TestOverrideParams(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	cfg := `{"override_params":{"model":"root-model","temperature":0.3,"top_p":0.9},"strategy":{"mode":"single"},
		"targets":[` + target(up.fakeOpenAI, `"override_params":{"model":"leaf-model","max_tokens":7,"metadata":{"a":"b"}}`) + `]}`
	resp, raw := do(t, "POST", "/chat/completions",
		[]byte(`{"model":"client-model","temperature":1,"seed":42,"messages":[{"role":"user","content":"hi"}]}`), "x-gateway-config", compactJSON(t, cfg))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var sent map[string]any
	if err := json.Unmarshal(up.last().Body, &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"model": "leaf-model", "temperature": 0.3, "top_p": 0.9, "max_tokens": 7.0, "seed": 42.0}
	for k, v := range want {
		if sent[k] != v {
			t.Errorf("upstream %s = %v, want %v (body %s)", k, sent[k], v, up.last().Body)
		}
	}
	if m, _ := sent["metadata"].(map[string]any); m["a"] != "b" {
		t.Errorf("object values are set whole: %v", sent["metadata"])
	}
	if !strings.Contains(string(raw), `"model":"leaf-model"`) {
		t.Errorf("the fake echoes the model it was sent: %s", raw)
	}
}

// TestNoFallbackAfterFirstByte: a stream that broke after its first event
// reached the client is never retried or replaced by a fallback.
func TestNoFallbackAfterFirstByte(t *testing.T) {
	a, b := newScripted(t, reply{resetAfterFirst: true}), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"fallback"},"retry":{"attempts":3},"targets":[` + target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]}`
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","stream":true,"messages":[]}`), "x-gateway-config", compactJSON(t, cfg))
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"content":"Hel"`) || !strings.Contains(string(raw), `data: {"error":{`) {
		t.Fatalf("want the first event then an error event: %d %q", resp.StatusCode, raw)
	}
	if a.count() != 1 || b.count() != 0 {
		t.Fatalf("hits a=%d b=%d after bytes reached the client", a.count(), b.count())
	}
	if got := lastAttempts(t); got != "config.targets[0]:stream_failed:200" {
		t.Fatalf("attempts %s", got)
	}
}
