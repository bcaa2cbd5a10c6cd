package integration

import (
	"net/http"
	"testing"
)

// TestTenancyPrompts checks, in both directions between two workspaces of
// one organisation, that a prompt is reachable only from its workspace:
// the other workspace's key cannot list, read, render, complete, update,
// publish or delete it, by id or by slug, and cannot create a prompt in
// the owner's workspace; the owner's prompt is unchanged afterwards.
func TestTenancyPrompts(t *testing.T) {
	for _, pair := range tenantPairs {
		owner, other := pair.owner, pair.other
		t.Run(owner.name+" owns, "+other.name+" tries", func(t *testing.T) {
			up := newFakeOpenAI(t)
			loadTenancy(t, rlSite{}, false)
			as := func(k tenant) []string { return []string{"x-gateway-api-key", k.key} }

			var created struct{ ID, Slug string }
			call(t, "POST", "/prompts", `{"name":"Owner Only","string":"[{\"role\":\"user\",\"content\":\"secret plan {{q}}\"}]"}`, 200, &created, as(owner)...)
			if created.ID == "" || created.Slug != "owner-only" {
				t.Fatalf("created %+v", created)
			}
			// A prompt of the same slug in the other workspace is its own.
			var theirs struct{ ID, Slug string }
			call(t, "POST", "/prompts", `{"name":"Owner Only","string":"[{\"role\":\"user\",\"content\":\"theirs {{q}}\"}]"}`, 200, &theirs, as(other)...)
			if theirs.ID == created.ID || theirs.Slug != "owner-only" {
				t.Fatalf("the other workspace's prompt %+v", theirs)
			}

			for _, ref := range []string{created.ID} {
				for _, c := range []struct{ method, path, body string }{
					{"GET", "/prompts/" + ref, ""},
					{"GET", "/prompts/" + ref + "/versions", ""},
					{"GET", "/prompts/" + ref + "/versions/1", ""},
					{"POST", "/prompts/" + ref + "/render", `{"variables":{"q":"x"}}`},
					{"PUT", "/prompts/" + ref, `{"name":"taken over"}`},
					{"PUT", "/prompts/" + ref + "/versions/1", `{"label_id":"x"}`},
					{"PUT", "/prompts/" + ref + "/makeDefault", `{"version":1}`},
					{"DELETE", "/prompts/" + ref, ""},
				} {
					callErr(t, c.method, c.path, c.body, 404, as(other)...)
				}
				resp, raw := doRetry(t, "POST", "/prompts/"+ref+"/completions", `{"variables":{"q":"x"}}`,
					"x-gateway-api-key", other.key, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
				if resp.StatusCode != 404 || up.count() != 0 {
					t.Fatalf("completion of the owner's prompt by the other key: %d %s (provider saw %d)", resp.StatusCode, raw, up.count())
				}
			}
			// By slug, the other key reaches its own prompt, never the owner's.
			var r rendered
			call(t, "POST", "/prompts/owner-only/render", `{"variables":{"q":"x"}}`, 200, &r, as(other)...)
			if len(r.Data.Messages) != 1 || r.Data.Messages[0].Content != "theirs x" {
				t.Fatalf("the other key rendered %+v", r)
			}
			var list struct {
				Total int
				Data  []struct{ ID string }
			}
			call(t, "GET", "/prompts", "", 200, &list, as(other)...)
			if list.Total != 1 || list.Data[0].ID != theirs.ID {
				t.Fatalf("the other key lists %+v", list)
			}
			callErr(t, "POST", "/prompts", `{"name":"planted","workspace_id":"`+owner.ws+`","string":"[{\"role\":\"user\",\"content\":\"x\"}]"}`, http.StatusForbidden, as(other)...)
			callErr(t, "GET", "/prompts?workspace_id="+owner.ws, "", http.StatusForbidden, as(other)...)

			// The owner's prompt is intact and still the owner's.
			call(t, "POST", "/prompts/"+created.ID+"/render", `{"variables":{"q":"x"}}`, 200, &r, as(owner)...)
			if len(r.Data.Messages) != 1 || r.Data.Messages[0].Content != "secret plan x" {
				t.Fatalf("the owner rendered %+v", r)
			}
			call(t, "GET", "/prompts", "", 200, &list, as(owner)...)
			if list.Total != 1 || list.Data[0].ID != created.ID {
				t.Fatalf("the owner lists %+v", list)
			}
		})
	}
}
