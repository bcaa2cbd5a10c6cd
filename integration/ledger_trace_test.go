package integration

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
)

// TestLogsFindTraces: through a real Caddy, on each store, GET /v1/logs
// with trace_id finds the record of a request whose trace id the client
// sent (an OpenTelemetry trace id, a random UUID, any string: the ledger's
// bucket index) and of one whose id the gateway made up (its text index),
// each alone, and nothing for an id never sent.
func TestLogsFindTraces(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			loadFresh(t, ledgerSite(st.dsn(t)))
			hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
			body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
			var traces []string
			for _, sent := range []string{"4bf92f3577b34da6a3ce929d0e0e4736", uuid.NewString(), "checkout/flow 42", ""} {
				h := hdr
				if sent != "" {
					h = append(append([]string{}, hdr...), "x-gateway-trace-id", sent)
				}
				resp, raw := do(t, http.MethodPost, "/chat/completions", body, h...)
				got := resp.Header.Get("X-Gateway-Trace-Id")
				if resp.StatusCode != 200 || (sent != "" && got != sent) || got == "" {
					t.Fatalf("request with trace id %q: %d, trace %q: %s", sent, resp.StatusCode, got, raw)
				}
				traces = append(traces, got)
			}
			syncLedger(t)
			for _, id := range append(traces, "never-sent") {
				var logs struct {
					Total int64
					Data  []struct {
						TraceID string `json:"trace_id"`
					}
				}
				if code := getJSON(t, "/logs?trace_id="+url.QueryEscape(id), gatewayKey, &logs); code != 200 {
					t.Fatalf("GET /v1/logs?trace_id=%s: %d", id, code)
				}
				want := int64(1)
				if id == "never-sent" {
					want = 0
				}
				if logs.Total != want || int64(len(logs.Data)) != want || (want == 1 && logs.Data[0].TraceID != id) {
					t.Errorf("trace %q: %d records %+v, want %d", id, logs.Total, logs.Data, want)
				}
			}
		})
	}
}
