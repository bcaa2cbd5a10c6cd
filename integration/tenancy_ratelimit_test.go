package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestTenancyRateLimit checks, in both directions between two workspaces
// of one organisation and with both limiters, that a rate-limit policy
// applies only within its own workspace whatever its conditions say: the
// other workspace's key is never throttled by it, cannot read, change or
// archive it, cannot create a policy in the owner's workspace, and a
// policy it writes with conditions naming the owner's workspace stays
// confined to its own. A 429 names only the caller's own policy.
func TestTenancyRateLimit(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		for _, pair := range tenantPairs {
			owner, other := pair.owner, pair.other
			t.Run(backend+"/"+owner.name+" owns, "+other.name+" tries", func(t *testing.T) {
				s := rlSite{}
				if backend == "redis" {
					requireRedis(t)
					s.Redis = redisBlock(false)
				}
				up := newFakeOpenAI(t)
				loadTenancy(t, s, false)

				// The other workspace may write conditions naming the
				// owner's workspace; the policy is still its own.
				hostile := createPolicy(t, other.key, `{"type":"requests","unit":"rpm","value":1,"name":"hostile","conditions":[{"key":"workspace_id","value":"`+owner.ws+`"}],"group_by":[{"key":"workspace_id"}]}`)
				// It cannot place a policy in the owner's workspace.
				status, m := api(t, other.key, http.MethodPost, "/policies/rate-limits", `{"type":"requests","unit":"rpm","value":1,"workspace_id":"`+owner.ws+`","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
				if status != 400 || errParam(m) != "workspace_id" {
					t.Fatalf("create in the owner's workspace: %d %v", status, m)
				}
				// The owner's policy: two requests a minute for any key.
				own := createPolicy(t, owner.key, `{"type":"requests","unit":"rpm","value":2,"name":"owner limit","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"workspace_id"}]}`)

				for i := 0; i < 2; i++ {
					resp, raw := rlChat(t, gatewayURL(), owner.key, up.URL, "")
					if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "2" {
						t.Fatalf("owner request %d: %d %v %s", i, resp.StatusCode, resp.Header, raw)
					}
				}
				resp, raw := rlChat(t, gatewayURL(), owner.key, up.URL, "")
				if resp.StatusCode != 429 || resp.Header.Get("x-ratelimit-limit-requests") != "2" {
					t.Fatalf("owner's third request: %d %v %s", resp.StatusCode, resp.Header, raw)
				}
				var env apiError
				_ = json.Unmarshal(raw, &env)
				if !strings.Contains(env.Error.Message, `"owner limit"`) || strings.Contains(string(raw), "hostile") || strings.Contains(string(raw), hostile) {
					t.Fatalf("the 429 names another workspace's policy: %s", raw)
				}

				// The owner's exhausted policy never throttles the other
				// workspace, and its own hostile policy does not apply to it.
				for i := 0; i < 3; i++ {
					resp, raw := rlChat(t, gatewayURL(), other.key, up.URL, "")
					if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-limit-requests") != "" {
						t.Fatalf("other workspace request %d: %d %v %s", i, resp.StatusCode, resp.Header, raw)
					}
				}

				// The owner's policy is invisible to the other key.
				for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
					body := ""
					if method == http.MethodPut {
						body = `{"value":1000}`
					}
					if status, m := api(t, other.key, method, "/policies/rate-limits/"+own, body); status != 404 {
						t.Fatalf("%s of the owner's policy by the other key: %d %v", method, status, m)
					}
				}
				_, list := api(t, other.key, http.MethodGet, "/policies/rate-limits", "")
				data, _ := list["data"].([]any)
				if len(data) != 1 || data[0].(map[string]any)["id"] != hostile {
					t.Fatalf("the other key lists %v", list)
				}
				// Nothing the other key tried changed the owner's policy.
				status, p := api(t, owner.key, http.MethodGet, "/policies/rate-limits/"+own, "")
				if status != 200 || p["value"] != 2.0 || p["status"] != "active" {
					t.Fatalf("owner's policy after the other key's attempts: %d %v", status, p)
				}
			})
		}
	}
}

// TestTenancyRateLimitRejectionLogged checks that a 429 is logged like the
// gateway's other answers: with a site access log, the gateway's fields
// (trace id, key name, workspace, the policy ids, status) join Caddy's
// entry for the request; without one, the handler writes its own entry.
// Either way llm_gateway_ratelimit_rejections_total counts it, under
// bounded labels, and no secret reaches the log or the metrics.
func TestTenancyRateLimitRejectionLogged(t *testing.T) {
	for _, accessLog := range []bool{true, false} {
		name := "own entry"
		if accessLog {
			name = "access log"
		}
		t.Run(name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			logFile := loadTenancy(t, rlSite{}, accessLog)
			id := createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`)
			before := rejections(t)
			if resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			trace := "tenancy-trace-" + name[:3]
			resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", "x-gateway-trace-id", trace)
			if resp.StatusCode != 429 || resp.Header.Get("x-gateway-trace-id") != trace {
				t.Fatalf("second request: %d %v %s", resp.StatusCode, resp.Header, raw)
			}
			if got := rejections(t); got != before+1 {
				t.Fatalf("llm_gateway_ratelimit_rejections_total went from %v to %v", before, got)
			}

			want := []string{`"trace_id":"` + trace + `"`, `"api_key_name":"test"`, `"workspace_id":"` + rlWS + `"`,
				`"status":429`, `"ratelimit_policy_id":"` + id + `"`, `"ratelimit_policy_ids":["` + id + `"]`}
			readLog(t) // let the writes land
			file, kind := logPath, `"msg":"rate limit exceeded"`
			if accessLog {
				file, kind = logFile, `"logger":"http.log.access`
			}
			lines := linesWith(t, file, append(want, kind)...)
			if len(lines) != 1 || strings.Count(lines[0], `"status":`) != 1 {
				b, _ := os.ReadFile(file)
				t.Fatalf("want one entry with %v, got %d:\n%s", want, len(lines), b)
			}
			if accessLog && len(linesWith(t, logPath, `"msg":"rate limit exceeded"`)) != 0 {
				t.Fatal("a request in the access log also got the handler's own entry")
			}
			// The gateway's fields carry no secret. (Caddy's own request
			// headers in the access log are the site's log filter's job.)
			var entry map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
				t.Fatal(err)
			}
			delete(entry, "request")
			delete(entry, "resp_headers")
			ours, _ := json.Marshal(entry)
			for _, secret := range []string{gatewayKey, "sk-test-provider"} {
				if strings.Contains(string(ours), secret) {
					t.Fatalf("secret in the log entry: %s", ours)
				}
			}
		})
	}
}

// rejections reads llm_gateway_ratelimit_rejections_total for requests
// policies per minute from the admin endpoint (0 when absent).
func rejections(t *testing.T) float64 {
	t.Helper()
	code, body := getAdmin(t, "/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	const series = `llm_gateway_ratelimit_rejections_total{type="requests",unit="rpm"} `
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err != nil {
				t.Fatalf("series %q", l)
			}
			return f
		}
	}
	return 0
}
