package checks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// loopbackEnv allows the egress client to reach httptest servers.
func loopbackEnv(t *testing.T) *guardrails.Env {
	t.Helper()
	g, err := upstream.NewGuard([]string{"loopback"})
	if err != nil {
		t.Fatal(err)
	}
	return &guardrails.Env{Client: guardrails.NewEgressClient(g)}
}

func withEnv(in *guardrails.Input, env *guardrails.Env) *guardrails.Input {
	in.Env = env
	return in
}

func TestWebhook(t *testing.T) {
	var got atomic.Value
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(map[string]string{"body": string(b), "auth": r.Header.Get("X-Token")})
		switch r.URL.Path {
		case "/pass":
			_, _ = w.Write([]byte(`{"verdict":true}`))
		case "/fail":
			_, _ = w.Write([]byte(`{"verdict":false,"data":{"reason":"nope"}}`))
		case "/transform":
			_, _ = w.Write([]byte(`{"verdict":true,"transformedData":{"request":{"json":{"model":"m","messages":[{"role":"user","content":"rewritten"}]}},"response":{"json":{"choices":[]}}}}`))
		case "/500":
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"error":"boom"}`))
		case "/text":
			_, _ = w.Write([]byte(`not json`))
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	env := loopbackEnv(t)
	p := func(path string, extra string) string {
		return `{"webhookURL":"` + srv.URL + path + `"` + extra + `}`
	}
	runCases(t, "webhook", []checkCase{
		{name: "verdict true", in: withEnv(before("x"), env), params: p("/pass", ""), pass: true},
		{name: "verdict false", in: withEnv(before("x"), env), params: p("/fail", ""), pass: false},
		{name: "non-2xx is an error with the body", in: withEnv(before("x"), env), params: p("/500", ""), errSub: `HTTP error 500: {"error":"boom"}`},
		{name: "non-JSON answer", in: withEnv(before("x"), env), params: p("/text", ""), errSub: "not a JSON object"},
		{name: "missing URL", in: withEnv(before("x"), env), params: `{}`, errSub: "missing webhookURL"},
		{name: "invalid URL", in: withEnv(before("x"), env), params: `{"webhookURL":"ftp://x"}`, errSub: "invalid URL"},
		{name: "bad headers", in: withEnv(before("x"), env), params: p("/pass", `,"headers":"[1]"`), errSub: "headers"},
		{name: "no client", in: before("x"), params: p("/pass", ""), errSub: "no egress client"},
	})

	t.Run("posts the context with headers", func(t *testing.T) {
		in := withEnv(before("hello"), env)
		in.Provider, in.Metadata = "openai", map[string]string{"k": "v"}
		if _, err := run(t, "webhook", in, p("/pass", `,"headers":"{\"X-Token\":\"t1\"}"`)); err != nil {
			t.Fatal(err)
		}
		m := got.Load().(map[string]string)
		body := m["body"]
		if m["auth"] != "t1" || gjson.Get(body, "eventType").Str != "beforeRequestHook" ||
			gjson.Get(body, "request.text").Str != "hello" || gjson.Get(body, "provider").Str != "openai" ||
			gjson.Get(body, "metadata.k").Str != "v" || gjson.Get(body, "request.json.model").Str != "gpt-4o" ||
			gjson.Get(body, "request.headers").Exists() {
			t.Fatalf("webhook got %v", m)
		}
	})
	t.Run("transformed request honoured before", func(t *testing.T) {
		v, err := run(t, "webhook", withEnv(before("x"), env), p("/transform", ""))
		if err != nil || !v.Transformed || gjson.GetBytes(v.Body, "messages.0.content").Str != "rewritten" {
			t.Fatalf("%+v %v", v, err)
		}
	})
	t.Run("transformed response honoured after", func(t *testing.T) {
		v, err := run(t, "webhook", withEnv(after("x"), env), p("/transform", ""))
		if err != nil || !v.Transformed || string(v.Body) != `{"choices":[]}` {
			t.Fatalf("%+v %v", v, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, err := run(t, "webhook", withEnv(before("x"), env), p("/slow", `,"timeout":20`))
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want a deadline error", err)
		}
	})
	t.Run("egress policy refuses loopback", func(t *testing.T) {
		publicOnly := &guardrails.Env{Client: guardrails.NewEgressClient(nil)}
		_, err := run(t, "webhook", withEnv(before("x"), publicOnly), p("/pass", ""))
		if err == nil || !strings.Contains(err.Error(), "custom_host_allow") || strings.Contains(err.Error(), "/pass") {
			t.Fatalf("err %v, want a policy refusal without the URL's path", err)
		}
	})
}

func TestLog(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		var v map[string]any
		if json.NewDecoder(r.Body).Decode(&v) != nil || v["eventType"] != "afterRequestHook" {
			w.WriteHeader(400)
			return
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	env := loopbackEnv(t)
	runCases(t, "log", []checkCase{
		{name: "logged", in: withEnv(after("x"), env), params: `{"logURL":"` + srv.URL + `/ok"}`, pass: true},
		{name: "log endpoint fails", in: withEnv(after("x"), env), params: `{"logURL":"` + srv.URL + `/bad"}`, errSub: "HTTP error 503"},
		{name: "missing URL", in: withEnv(after("x"), env), params: `{}`, errSub: "missing logURL"},
	})
	if n.Load() != 2 {
		t.Fatalf("log endpoint called %d times, want 2", n.Load())
	}
}

func TestValidURLs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead || r.Header.Get("User-Agent") != "URLValidator/1.0" {
			w.WriteHeader(400)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/missing") {
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	env := loopbackEnv(t)
	env.LookupHost = func(_ context.Context, host string) ([]string, error) {
		if host == "good.example" {
			return []string{"203.0.113.1"}, nil
		}
		return nil, errors.New("no such host")
	}
	ok, missing := srv.URL+"/a", srv.URL+"/missing"
	runCases(t, "validUrls", []checkCase{
		{name: "all reachable", in: withEnv(after("see "+ok+" and "+ok+"/b"), env), params: `{}`, pass: true},
		{name: "one 404", in: withEnv(after("see "+ok+", "+missing), env), params: `{}`, pass: false},
		{name: "not inverts", in: withEnv(after("see "+missing), env), params: `{"not":true}`, pass: true},
		{name: "no URLs fails", in: withEnv(after("no links"), env), params: `{}`, pass: false},
		{name: "no URLs fails with not", in: withEnv(after("no links"), env), params: `{"not":true}`, pass: false},
		{name: "dns only", in: withEnv(after("https://good.example/x"), env), params: `{"onlyDNS":true}`, pass: true},
		{name: "dns only unresolvable", in: withEnv(after("https://good.example/x http://bad.example"), env), params: `{"onlyDNS":true}`, pass: false},
		{name: "empty text", in: withEnv(after(""), env), params: `{}`, errSub: "missing text"},
		{name: "policy makes internal URLs invalid", in: withEnv(after("see "+ok), &guardrails.Env{Client: guardrails.NewEgressClient(nil)}), params: `{}`, pass: false},
	})
	var many strings.Builder
	for i := 0; i < 25; i++ {
		many.WriteString(srv.URL + "/" + strings.Repeat("x", i+1) + " ")
	}
	if _, err := run(t, "validUrls", withEnv(after(many.String()), env), `{}`); err == nil || !strings.Contains(err.Error(), "at most 20") {
		t.Fatalf("err %v", err)
	}
}
