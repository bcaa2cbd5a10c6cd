package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestKeysBatchRunsAsAPIKey: a managed batch created with an API-issued
// key runs its lines as that key (not only Caddyfile keys can): its
// default virtual key routes them and its model allow-list refuses the
// line naming another model.
func TestKeysBatchRunsAsAPIKey(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	s.load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"batcher","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"allowed_models":["gpt-4o*"]}`, 200, &created)
	key := []string{"x-gateway-api-key", created.Key}
	lines := string(openaiBatchLines(3, 0)) +
		`{"custom_id":"req-o3","method":"POST","url":"/v1/chat/completions","body":{"model":"o3","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	base := gatewayURL()
	file := uploadBatchFile(t, base, []byte(lines), key...)
	id := mustCreateBatch(t, base, file, append(key, "x-gateway-virtual-key", "openai")...)
	b := waitBatchDone(t, base, id, key...)
	if b.Get("status").Str != "completed" || b.Get("request_counts.completed").Int() != 3 || b.Get("request_counts.failed").Int() != 1 {
		t.Fatalf("batch: %s", b.Raw)
	}
	status, errs := bcall(t, "GET", base, "/files/"+b.Get("error_file_id").Str+"/content", nil, "", key...)
	if status != 200 || !strings.Contains(string(errs), "req-o3") || !strings.Contains(string(errs), "model_not_allowed") {
		t.Fatalf("error file: %d %s", status, errs)
	}
	if up.count() != 3 {
		t.Fatalf("the provider saw %d calls, want 3", up.count())
	}
}

// TestKeysModelListNarrowed: GET /v1/models lists only the models the
// key's allow-list permits; a key without one sees the provider's list.
func TestKeysModelListNarrowed(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.URL.Path != "/v1/models" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"},{"id":"gpt-4o-mini","object":"model"},{"id":"o3","object":"model"}]}`)
		return true
	}
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	s.load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"4o","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"allowed_models":["gpt-4o*"]}`, 200, &created)
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{created.Key, []string{"gpt-4o", "gpt-4o-mini"}},
		{gatewayKey, []string{"gpt-4o", "gpt-4o-mini", "o3"}},
	} {
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		as(t, tc.key, "GET", "/models", "", 200, &list, "x-gateway-virtual-key", "openai")
		var got []string
		for _, m := range list.Data {
			got = append(got, m.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("models %v, want %v", got, tc.want)
		}
	}
}
