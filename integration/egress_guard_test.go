package integration

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// acceptCounter listens on 127.0.0.1 and counts accepted connections; it
// never answers, so only a connection, not an HTTP exchange, is counted.
func acceptCounter(t *testing.T) (port string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

type refusal struct {
	status  int
	code    string
	message string
}

func refusalOf(t *testing.T, status int, raw []byte) refusal {
	t.Helper()
	var env struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Error.Message == "" {
		t.Fatalf("not an error envelope (%d): %s", status, raw)
	}
	return refusal{status, env.Error.Code, env.Error.Message}
}

// TestEgressRefusedVectors: under the default egress policy every loopback
// spelling of a client-given custom host is refused before connecting (the
// listener accepts nothing), and the answer is the same whether the port is
// open or closed, so the gateway is no port scanner.
func TestEgressRefusedVectors(t *testing.T) {
	testRefusedVectors(t, []egressVector{
		{"ipv4 loopback", "http://127.0.0.1:%s/v1", true},
		{"other loopback address", "http://127.9.9.9:%s/v1", true},
		{"localhost", "http://localhost:%s/v1", true},
		{"ipv6 loopback", "http://[::1]:%s/v1", true},
		{"unspecified", "http://0.0.0.0:%s/v1", true},
		{"ipv4-mapped ipv6", "http://[::ffff:127.0.0.1]:%s/v1", true},
		// Spellings Go's resolver does not read as addresses: they fail
		// as unknown names, again alike for open and closed ports.
		{"decimal", "http://2130706433:%s/v1", false},
		{"hex", "http://0x7f000001:%s/v1", false},
		{"short", "http://127.1:%s/v1", false},
	})
}

// TestEgressRefusedHTTPS: the same for https custom hosts, which Caddy's
// proxy dials through its DialTLSContext rather than DialContext; it
// needs the gateway to guard the transport with upstream.WrapTransport.
func TestEgressRefusedHTTPS(t *testing.T) {
	testRefusedVectors(t, []egressVector{
		{"https loopback", "https://127.0.0.1:%s/v1", true},
		{"https localhost", "https://localhost:%s/v1", true},
		{"https unspecified", "https://0.0.0.0:%s/v1", true},
	})
}

type egressVector struct {
	name  string
	host  string // with %s for the port
	guard bool   // resolves to an internal address: the guard's refusal
}

func testRefusedVectors(t *testing.T, vectors []egressVector) {
	open, accepted := acceptCounter(t)
	closed := itoa(freePort())
	loadSite(t, site{Gateway: "max_request_body 1MB"}) // no custom_host_allow
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	blocked := refusal{400, "custom_host_not_allowed", ""}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			var got []refusal
			for _, port := range []string{open, closed} {
				for _, how := range []string{"header", "inline config"} {
					host := strings.Replace(v.host, "%s", port, 1)
					headers := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", host, "Authorization", "Bearer sk-test-provider"}
					if how == "inline config" {
						cfg, _ := json.Marshal(map[string]string{"provider": "openai", "api_key": "sk-test-provider", "custom_host": host})
						headers = []string{"x-gateway-config", string(cfg)}
					}
					resp, raw := do(t, "POST", "/chat/completions", body, headers...)
					r := refusalOf(t, resp.StatusCode, raw)
					if strings.Contains(r.message, port) {
						t.Fatalf("the refusal names the port: %q", r.message)
					}
					got = append(got, r)
				}
			}
			for _, r := range got[1:] {
				if r != got[0] {
					t.Fatalf("answers differ by port or route: %+v", got)
				}
			}
			if v.guard {
				blocked.message = got[0].message
				if got[0].status != blocked.status || got[0].code != blocked.code {
					t.Fatalf("got %+v, want 400 custom_host_not_allowed", got[0])
				}
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("refused custom hosts opened %d connections", n)
	}
}

// TestEgressAzureHostFields: client fields a provider builds a host name
// from must be DNS labels; anything else is a 400 naming the field, and
// nothing is dialled.
func TestEgressAzureHostFields(t *testing.T) {
	open, accepted := acceptCounter(t)
	loadSite(t, site{Gateway: "max_request_body 1MB"})
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	cases := []struct {
		name, param string
		headers     []string
	}{
		{"resource name with a host", "resource_name", []string{"x-gateway-provider", "azure-openai", "x-gateway-cloudb-resource-name", "127.0.0.1:" + open + "/#",
			"x-gateway-cloudb-deployment-id", "d", "x-gateway-cloudb-api-version", "2024-10-21"}},
		{"resource name with a dot", "resource_name", []string{"x-gateway-provider", "azure-openai", "x-gateway-cloudb-resource-name", "localhost.",
			"x-gateway-cloudb-deployment-id", "d", "x-gateway-cloudb-api-version", "2024-10-21"}},
		{"vertex region with a host", "cloudc_region", []string{"x-gateway-provider", "vertex-ai", "x-gateway-cloudc-region", "127.0.0.1:" + open + "/x", "x-gateway-cloudc-project-id", "p"}},
		{"vertex region not a label", "cloudc_region", []string{"x-gateway-provider", "vertex-ai", "x-gateway-cloudc-region", "-us", "x-gateway-cloudc-project-id", "p"}},
		{"bedrock region with a host", "clouda_region", []string{"x-gateway-provider", "bedrock", "x-gateway-clouda-region", "localhost:" + open,
			"x-gateway-clouda-access-key-id", "AKIA", "x-gateway-clouda-secret-access-key", "s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := do(t, "POST", "/chat/completions", body, append(tc.headers, "Authorization", "Bearer sk-test-provider")...)
			var env struct {
				Error struct {
					Param string `json:"param"`
				} `json:"error"`
			}
			_ = json.Unmarshal(raw, &env)
			if resp.StatusCode != 400 || env.Error.Param != tc.param {
				t.Fatalf("status %d param %q, want 400 %s: %s", resp.StatusCode, env.Error.Param, tc.param, raw)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("refused host fields opened %d connections", n)
	}
}

// TestEgressAllowedWithPolicy: custom_host_allow loopback lets the same
// custom host through, so the refusals above are the policy's.
func TestEgressAllowedWithPolicy(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{Gateway: "custom_host_allow loopback"})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1", "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 || up.count() != 1 {
		t.Fatalf("status %d, upstream saw %d requests: %s", resp.StatusCode, up.count(), raw)
	}
}

// TestEgressVertexTokenURI: a client-sent service account whose token_uri
// is on loopback is refused under the default policy before any
// connection (the same 400 as a refused custom host); with
// custom_host_allow loopback the same kind of account works
// (TestVertexServiceAccountChat runs under that policy).
func TestEgressVertexTokenURI(t *testing.T) {
	open, accepted := acceptCounter(t)
	raw, _ := newServiceAccount(t, "p")
	var sa map[string]any
	if err := json.Unmarshal(raw, &sa); err != nil {
		t.Fatal(err)
	}
	sa["token_uri"] = "http://127.0.0.1:" + open + "/token"
	loadSite(t, site{Gateway: "max_request_body 1MB"})
	cfg, _ := json.Marshal(map[string]any{"provider": "vertex-ai", "cloudc_region": "europe-west4", "cloudc_service_account_json": sa})
	resp, body := do(t, "POST", "/chat/completions", []byte(`{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`),
		"x-gateway-config", string(cfg))
	r := refusalOf(t, resp.StatusCode, body)
	if r.status != 400 || r.code != "custom_host_not_allowed" {
		t.Fatalf("got %+v, want 400 custom_host_not_allowed", r)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the refused token_uri saw %d connections", n)
	}

	loadProviderSite(t) // custom_host_allow loopback
	up := fakeGemini(t, geminiFixtures(t))
	good, tokens := newServiceAccount(t, "sa-project")
	client := vertexClient(t, up, good)
	if _, err := client.Chat.Completions.New(context.Background(), toolTurnParams("gemini-2.5-flash")); err != nil {
		t.Fatalf("allowed token_uri: %v", err)
	}
	if tokens.issued.Load() != 1 {
		t.Fatalf("token endpoint issued %d tokens", tokens.issued.Load())
	}
}
