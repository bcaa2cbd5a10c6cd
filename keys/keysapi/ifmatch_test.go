package keysapi

import (
	"net/http"
	"testing"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
)

// TestKeysAPIIfMatch: every API key and virtual key answer carries its
// version as an ETag, and a write with an If-Match that no longer names
// the stored version stores nothing and is a 412 precondition_failed in
// the envelope; "*" and the current tag pass, a weak tag never does, and a
// write without If-Match is unconditional as before.
func TestKeysAPIIfMatch(t *testing.T) {
	e := cp.New(t, "keys", nil)
	w := e.Do(cp.Member, "POST", "/v1/api-keys/workspace/service", `{"name":"svc","scopes":["completions.write"]}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id := cp.Field(w, "id")
	tag := func(id, v string) string { return `"` + id + "." + v + `"` }
	if got := w.Header().Get("ETag"); got != tag(id, "1") {
		t.Fatalf("create ETag %q, want %q", got, tag(id, "1"))
	}
	w = e.Do(cp.Member, "POST", "/v1/virtual-keys", `{"name":"vk","provider":"openai","key":"sk-test-provider-key-1"}`)
	if w.Code != 200 {
		t.Fatalf("virtual key: %d %s", w.Code, w.Body)
	}
	vkID, slug := cp.Field(w, "id"), cp.Field(w, "slug")
	im := func(v string) http.Header { return http.Header{"If-Match": {v}} }
	key, vk := "/v1/api-keys/"+id, "/v1/virtual-keys/"+slug
	e.Run(t, []cp.Case{
		{Name: "read answers the version", Key: cp.Member, Method: "GET", Path: key, Status: 200, ETag: tag(id, "1")},
		{Name: "update at the current version", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"a"}`, Header: im(tag(id, "1")), Status: 200, ETag: tag(id, "2")},
		{Name: "update at a past version", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"b"}`, Header: im(tag(id, "1")), Status: 412, Code: "precondition_failed"},
		{Name: "nothing stored by the refused update", Key: cp.Member, Method: "GET", Path: key, Status: 200, Contains: `"name":"a"`, ETag: tag(id, "2")},
		{Name: "a weak tag never matches", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"b"}`, Header: im("W/" + tag(id, "2")), Status: 412, Code: "precondition_failed"},
		{Name: "another record's tag", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"b"}`, Header: im(tag(vkID, "2")), Status: 412},
		{Name: "one of a list", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"b"}`, Header: im(`"x.1", ` + tag(id, "2")), Status: 200, ETag: tag(id, "3")},
		{Name: "star", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"c"}`, Header: im("*"), Status: 200, ETag: tag(id, "4")},
		{Name: "without If-Match", Key: cp.Member, Method: "PUT", Path: key, Body: `{"name":"d"}`, Status: 200, ETag: tag(id, "5")},
		{Name: "rotate at a past version", Key: cp.Member, Method: "POST", Path: key + "/rotate", Body: `{}`, Header: im(tag(id, "4")), Status: 412, Code: "precondition_failed"},
		{Name: "rotate at the current version", Key: cp.Member, Method: "POST", Path: key + "/rotate", Body: `{}`, Header: im(tag(id, "5")), Status: 200, ETag: tag(id, "6")},
		{Name: "revoke at a past version", Key: cp.Member, Method: "DELETE", Path: key, Header: im(tag(id, "5")), Status: 412, Code: "precondition_failed"},
		{Name: "not revoked by the refused delete", Key: cp.Member, Method: "GET", Path: key, Status: 200, Contains: `"status":"active"`},
		{Name: "revoke at the current version", Key: cp.Member, Method: "DELETE", Path: key, Header: im(tag(id, "6")), Status: 200},

		{Name: "virtual key read", Key: cp.Member, Method: "GET", Path: vk, Status: 200, ETag: tag(vkID, "1")},
		{Name: "virtual key update at the current version", Key: cp.Member, Method: "PUT", Path: vk, Body: `{"note":"n1"}`, Header: im(tag(vkID, "1")), Status: 200, ETag: tag(vkID, "2")},
		{Name: "virtual key update at a past version", Key: cp.Member, Method: "PUT", Path: vk, Body: `{"note":"n2"}`, Header: im(tag(vkID, "1")), Status: 412, Code: "precondition_failed"},
		{Name: "virtual key rotate at a past version", Key: cp.Member, Method: "POST", Path: vk + "/rotate", Body: `{"key":"sk-test-provider-key-2"}`, Header: im(tag(vkID, "1")), Status: 412},
		{Name: "virtual key delete at a past version", Key: cp.Member, Method: "DELETE", Path: vk, Header: im(tag(vkID, "1")), Status: 412, Code: "precondition_failed"},
		{Name: "still there", Key: cp.Member, Method: "GET", Path: vk, Status: 200, ETag: tag(vkID, "2")},
		{Name: "virtual key delete at the current version", Key: cp.Member, Method: "DELETE", Path: vk, Header: im(tag(vkID, "2")), Status: 200},
		{Name: "gone", Key: cp.Member, Method: "GET", Path: vk, Status: 404},
	})
}
