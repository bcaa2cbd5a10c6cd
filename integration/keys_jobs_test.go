package integration

import (
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
