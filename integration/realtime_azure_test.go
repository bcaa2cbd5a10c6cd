package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"encoding/json"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"
	"github.com/tidwall/gjson"
)

// azureRealtime is Azure OpenAI's Realtime endpoint in front of the
// realtime fake: it takes a session only in Azure's shapes, the preview
// /openai/realtime?api-version={dated}&deployment={d} and the GA
// /openai/v1/realtime?model={d}, with the resource key in api-key (the
// fake Azure's key, azureKey), and refuses anything else as Azure does
// (404 for an unknown path or deployment, 401 for the key).
type azureRealtime struct {
	*httptest.Server
	rt   *fakeRealtime
	mu   sync.Mutex
	urls []string
}

func newAzureRealtime(t *testing.T) *azureRealtime {
	a := &azureRealtime{rt: newFakeRealtime(t)}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.urls = append(a.urls, r.URL.RequestURI())
		a.mu.Unlock()
		if r.Header.Get("api-key") != azureKey || r.Header.Get("Authorization") != "" {
			http.Error(w, `{"error":{"code":"401","message":"Access denied due to invalid subscription key."}}`, http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		ok := false
		switch r.URL.Path {
		case "/openai/realtime":
			ok = q.Get("deployment") == "rt-dep" && q.Get("api-version") == "2024-10-01-preview"
		case "/openai/v1/realtime":
			ok = q.Get("model") == "rt-dep" && q.Get("api-version") == ""
		}
		if !ok {
			http.Error(w, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, http.StatusNotFound)
			return
		}
		r.URL.Path, r.URL.RawQuery = "/v1/realtime", "model=gpt-realtime"
		a.rt.serve(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

// TestRealtimeAzure opens sessions with openai-go's realtime client
// through two Azure OpenAI virtual keys, one on a dated preview version
// and one on the v1 (GA) API, each mapping the model gpt-realtime to the
// deployment rt-dep: the gateway dials Azure's URL shape for each, with
// the resource key in api-key, relays a response, and records it
// (provider azure-openai) in the ledger.
func TestRealtimeAzure(t *testing.T) {
	up := newAzureRealtime(t)
	loadSite(t, site{LLM: fmt.Sprintf(`virtual_key az-preview {
			provider azure-openai
			api_key %[1]s
			custom_host %[2]s
			deployment rt-dep gpt-realtime 2024-10-01-preview default
		}
		virtual_key az-ga {
			provider azure-openai
			api_key %[1]s
			custom_host %[2]s
			deployment rt-dep gpt-realtime v1 default
		}
		ledger %[3]q`, azureKey, up.URL, filepath.Join(t.TempDir(), "ledger.db"))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, vk := range []string{"az-preview", "az-ga"} {
		client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(gatewayKey),
			option.WithHeader("x-gateway-virtual-key", vk))
		conn, err := client.Realtime.Connect(ctx, realtime.RealtimeConnectionOptions{}, option.WithQuery("model", "gpt-realtime"))
		if err != nil {
			t.Fatalf("%s: connect: %v (Azure saw %v)", vk, err, up.urls)
		}
		recvUntil(t, ctx, conn.RecvRaw, "session.created")
		if err := conn.SendRaw(ctx, json.RawMessage(`{"type":"response.create"}`)); err != nil {
			t.Fatal(err)
		}
		recvUntil(t, ctx, conn.RecvRaw, "response.done")
		_ = conn.Close()
	}
	want := []string{"/openai/realtime?api-version=2024-10-01-preview&deployment=rt-dep", "/openai/v1/realtime?model=rt-dep"}
	if len(up.urls) != 2 || up.urls[0] != want[0] || up.urls[1] != want[1] {
		t.Errorf("Azure saw %v, want %v", up.urls, want)
	}
	var logs struct {
		Data []struct {
			Provider string `json:"provider"`
			Input    int64  `json:"input_tokens"`
		}
	}
	realtimeWait(t, "a ledger record per response", func() bool {
		syncLedger(t)
		return getJSON(t, "/logs?page_size=100", gatewayKey, &logs) == 200 && len(logs.Data) == 2
	})
	for _, l := range logs.Data {
		if l.Provider != "azure-openai" || l.Input != 100 {
			t.Errorf("ledger record %+v, want azure-openai with the events' usage", l)
		}
	}
}

// TestRealtimeClientSecrets mints a Realtime client secret through the
// gateway (POST /v1/realtime/client_secrets) with a virtual key: the
// provider gets the virtual key's credential and neither the gateway key
// nor its headers, the client gets the provider's secret, and the call is
// logged and recorded with the secret's model (session.model).
func TestRealtimeClientSecrets(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/realtime/client_secrets" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+realtimeProviderKey {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return true
		}
		w.Write([]byte(`{"value":"ek_test_secret","expires_at":1796245000,"session":{"type":"realtime","object":"realtime.session","model":"gpt-realtime"}}`))
		return true
	}
	loadSite(t, site{LLM: fmt.Sprintf("virtual_key vk-rt {\n\t\t\tprovider openai\n\t\t\tapi_key %s\n\t\t\tcustom_host %s/v1\n\t\t}\n\t\tledger %q",
		realtimeProviderKey, up.URL, filepath.Join(t.TempDir(), "ledger.db"))})
	resp, body := do(t, "POST", "/realtime/client_secrets", []byte(`{"session":{"type":"realtime","model":"gpt-realtime"}}`),
		"x-gateway-virtual-key", "vk-rt")
	if resp.StatusCode != 200 || gjson.GetBytes(body, "value").Str != "ek_test_secret" {
		t.Fatalf("mint: %d %s", resp.StatusCode, body)
	}
	seen := up.last()
	for k, v := range seen.Header {
		if strings.Contains(strings.Join(v, " "), gatewayKey) || strings.HasPrefix(strings.ToLower(k), "x-gateway") {
			t.Errorf("the provider got the gateway's header %s: %v", k, v)
		}
	}
	var logs struct {
		Data []struct {
			Model  string `json:"model"`
			Status int    `json:"status"`
		}
	}
	realtimeWait(t, "the mint's ledger record", func() bool {
		syncLedger(t)
		return getJSON(t, "/logs?page_size=100", gatewayKey, &logs) == 200 && len(logs.Data) == 1
	})
	if logs.Data[0].Model != "gpt-realtime" {
		t.Errorf("ledger record %+v, want the secret's model", logs.Data[0])
	}
}
