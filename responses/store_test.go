package responses

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// clock is an injected, manually advanced clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// backends runs a store test against Caddy's file storage and, when
// Redis is reachable, Redis.
func backends(t *testing.T, f func(t *testing.T, s *Store, c *clock)) {
	t.Run("caddy_storage", func(t *testing.T) {
		c := &clock{t: time.Unix(1700000000, 0)}
		f(t, NewStore(&certmagic.FileStorage{Path: t.TempDir()}, StoreConfig{Now: c.now}), c)
	})
	t.Run("redis", func(t *testing.T) {
		c := &clock{t: time.Unix(1700000000, 0)}
		prefix := "llmgw-test-responses/" + NewID("")
		f(t, NewStore(NewRedisKV(redistest.Client(t, 0), time.Hour), StoreConfig{Prefix: prefix, Now: c.now}), c)
	})
}

// turn runs one translated turn without a provider: parse, chain, answer
// with text, save.
func turn(t *testing.T, s *Store, ws, body, answer string) *Request {
	t.Helper()
	ctx := context.Background()
	r, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r.CreatedAt = 1700000000
	var history []Item
	if r.PreviousResponseID != "" {
		if history, err = s.Chain(ctx, ws, r.PreviousResponseID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ToChat(r, r.Conversation(history)); err != nil {
		t.Fatal(err)
	}
	chat := `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + string(jsonString(answer)) + `},"finish_reason":"stop"}]}`
	resp, err := FromChat([]byte(chat), r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stored() {
		if err := s.Save(ctx, RecordOf(ws, r, resp)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestStoreSaveGetDelete(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		r := turn(t, s, "ws1", `{"model":"m","input":"hi","instructions":"secret sauce"}`, "hello")
		rec, err := s.Get(ctx, "ws1", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if gjson.GetBytes(rec.Response, "id").Str != r.ID || gjson.GetBytes(rec.Response, "output.0.content.0.text").Str != "hello" {
			t.Fatalf("stored response %s", rec.Response)
		}
		body, err := s.Delete(ctx, "ws1", r.ID)
		if err != nil || string(body) != `{"id":"`+r.ID+`","object":"response","deleted":true}` {
			t.Fatalf("Delete: %s %v", body, err)
		}
		_, err = s.Get(ctx, "ws1", r.ID)
		wantAPIError(t, err, http.StatusNotFound, "", r.ID)
		_, err = s.Delete(ctx, "ws1", r.ID)
		wantAPIError(t, err, http.StatusNotFound, "", r.ID)
	})
}

// TestStoreUnknownIDs: unknown, malformed and store:false ids are a 404
// for GET and a 400 for previous_response_id, as OpenAI answers.
func TestStoreUnknownIDs(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		unstored := turn(t, s, "ws1", `{"model":"m","input":"hi","store":false}`, "x")
		for _, id := range []string{unstored.ID, "resp_00", "resp_../../etc", "../x", "", NewID("resp_")} {
			_, err := s.Get(ctx, "ws1", id)
			wantAPIError(t, err, http.StatusNotFound, "", "")
			_, err = s.Chain(ctx, "ws1", id+"x")
			wantAPIError(t, err, http.StatusBadRequest, "previous_response_id", "not found")
		}
		_, err := s.Chain(ctx, "ws1", unstored.ID)
		wantAPIError(t, err, http.StatusBadRequest, "previous_response_id", unstored.ID)
	})
}

func TestStoreWorkspaceIsolation(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		r := turn(t, s, "ws-a", `{"model":"m","input":"hi"}`, "hello")
		_, err := s.Get(ctx, "ws-b", r.ID)
		wantAPIError(t, err, http.StatusNotFound, "", "")
		_, err = s.Delete(ctx, "ws-b", r.ID)
		wantAPIError(t, err, http.StatusNotFound, "", "")
		_, err = s.InputItems(ctx, "ws-b", r.ID, ListQuery{})
		wantAPIError(t, err, http.StatusNotFound, "", "")
		_, err = s.Chain(ctx, "ws-b", r.ID)
		wantAPIError(t, err, http.StatusBadRequest, "previous_response_id", "")
		if _, err := s.Get(ctx, "ws-a", r.ID); err != nil {
			t.Fatalf("owner lost access: %v", err)
		}
	})
}

func TestStoreExpiry(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, c *clock) {
		ctx := context.Background()
		r := turn(t, s, "ws1", `{"model":"m","input":"hi"}`, "hello")
		c.t = c.t.Add(DefaultRetention - time.Second)
		if _, err := s.Get(ctx, "ws1", r.ID); err != nil {
			t.Fatalf("expired early: %v", err)
		}
		c.t = c.t.Add(2 * time.Second)
		_, err := s.Get(ctx, "ws1", r.ID)
		wantAPIError(t, err, http.StatusNotFound, "", "")
		_, err = s.Chain(ctx, "ws1", r.ID)
		wantAPIError(t, err, http.StatusBadRequest, "previous_response_id", "")
	})
}

func TestStoreInputItemsPagination(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		var in []string
		for i := range 5 {
			in = append(in, `{"role":"user","content":"m`+string(rune('0'+i))+`"}`)
		}
		r := turn(t, s, "ws1", `{"model":"m","input":[`+strings.Join(in, ",")+`]}`, "ok")
		texts := func(body []byte) string {
			var out []string
			for _, d := range gjson.GetBytes(body, "data").Array() {
				out = append(out, d.Get("content.0.text").Str)
			}
			return strings.Join(out, ",")
		}
		cases := []struct {
			q       string
			want    string
			hasMore bool
		}{
			{"", "m4,m3,m2,m1,m0", false},
			{"order=asc", "m0,m1,m2,m3,m4", false},
			{"order=asc&limit=2", "m0,m1", true},
			{"limit=5", "m4,m3,m2,m1,m0", false},
		}
		for _, c := range cases {
			v, _ := url.ParseQuery(c.q)
			q, err := ParseListQuery(v)
			if err != nil {
				t.Fatal(err)
			}
			body, err := s.InputItems(ctx, "ws1", r.ID, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(body); got != c.want || gjson.GetBytes(body, "has_more").Bool() != c.hasMore || gjson.GetBytes(body, "object").Str != "list" {
				t.Fatalf("%q: %s", c.q, body)
			}
		}
		// Walk asc pages of 2 with after=last_id.
		var got []string
		after := ""
		for range 5 {
			body, err := s.InputItems(ctx, "ws1", r.ID, ListQuery{Limit: 2, Order: "asc", After: after})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, texts(body))
			if !gjson.GetBytes(body, "has_more").Bool() {
				break
			}
			after = gjson.GetBytes(body, "last_id").Str
		}
		if strings.Join(got, "|") != "m0,m1|m2,m3|m4" {
			t.Fatalf("pages %q", got)
		}
		_, err := s.InputItems(ctx, "ws1", r.ID, ListQuery{After: "msg_nope"})
		wantAPIError(t, err, http.StatusBadRequest, "after", "msg_nope")
	})
}

func TestParseListQueryBounds(t *testing.T) {
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "order=up"} {
		v, _ := url.ParseQuery(q)
		if _, err := ParseListQuery(v); err == nil {
			t.Fatalf("%s accepted", q)
		}
	}
}

// TestChainReplaysHistory: three turns; the third's chat call carries
// both earlier turns' input and output, oldest first, and only the
// third's instructions.
func TestChainReplaysHistory(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		r1 := turn(t, s, "ws1", `{"model":"m","input":"one","instructions":"first rules"}`, "a1")
		r2 := turn(t, s, "ws1", `{"model":"m","input":"two","previous_response_id":"`+r1.ID+`"}`, "a2")
		r3, err := Parse([]byte(`{"model":"m","input":"three","instructions":"third rules","previous_response_id":"` + r2.ID + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		history, err := s.Chain(ctx, "ws1", r3.PreviousResponseID)
		if err != nil {
			t.Fatal(err)
		}
		chat, err := ToChat(r3, r3.Conversation(history))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range gjson.GetBytes(chat, "messages").Array() {
			got = append(got, m.Get("role").Str+":"+m.Get("content").Str)
		}
		want := "system:third rules|user:one|assistant:a1|user:two|assistant:a2|user:three"
		if strings.Join(got, "|") != want {
			t.Fatalf("messages %q\nwant %q", strings.Join(got, "|"), want)
		}
	})
}

// TestResolveReferences: an item_reference to a stored item (input or
// output) is replaced by it; unknown ones are a 400.
func TestResolveReferences(t *testing.T) {
	backends(t, func(t *testing.T, s *Store, _ *clock) {
		ctx := context.Background()
		r1 := turn(t, s, "ws1", `{"model":"m","input":"one"}`, "a1")
		rec, _ := s.Get(ctx, "ws1", r1.ID)
		outID := itemID(rec.Output[0])
		inID := itemID(rec.Input[0])
		items := []Item{Item(`{"type":"item_reference","id":"` + inID + `"}`), Item(`{"type":"item_reference","id":"` + outID + `"}`), Item(`{"type":"message","role":"user","content":"next"}`)}
		got, err := s.ResolveReferences(ctx, "ws1", items)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || itemID(got[0]) != inID || itemID(got[1]) != outID || gjson.GetBytes(got[1], "role").Str != "assistant" {
			t.Fatalf("resolved %s", got)
		}
		for _, bad := range []string{"msg_1", "msg_" + strings.Repeat("a", 48) + "_1", outID} {
			ws := "ws1"
			if bad == outID {
				ws = "ws2"
			}
			_, err := s.ResolveReferences(ctx, ws, []Item{Item(`{"type":"item_reference","id":"` + bad + `"}`)})
			wantAPIError(t, err, http.StatusBadRequest, "input", bad)
		}
	})
}

func TestRecordKeepsNoInstructionsForReplay(t *testing.T) {
	r := mustParse(t, `{"model":"m","input":"hi","instructions":"private"}`)
	resp, _ := FromChat([]byte(`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`), r)
	rec := RecordOf("ws", r, resp)
	items, _ := json.Marshal(append(rec.Input, rec.Output...))
	if strings.Contains(string(items), "private") {
		t.Fatalf("instructions in replayed items: %s", items)
	}
}

func TestStoreSweep(t *testing.T) {
	c := &clock{t: time.Unix(1700000000, 0)}
	fsys := &certmagic.FileStorage{Path: t.TempDir()}
	s := NewStore(fsys, StoreConfig{Now: c.now, Retention: time.Hour})
	old := turn(t, s, "ws1", `{"model":"m","input":"old"}`, "x")
	c.t = c.t.Add(2 * time.Hour)
	fresh := mustParse(t, `{"model":"m","input":"new"}`)
	fresh.ID = NewID("resp_")
	if err := s.Save(context.Background(), RecordOf("ws2", fresh, &Response{ID: fresh.ID, CreatedAt: c.t.Unix(), Output: []Item{}})); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if _, err := fsys.Load(context.Background(), s.key("ws1", old.ID)); err == nil {
		t.Fatal("expired record still on disk")
	}
	if _, err := s.Get(context.Background(), "ws2", fresh.ID); err != nil {
		t.Fatalf("fresh record swept: %v", err)
	}
}

func TestNative(t *testing.T) {
	for slug, want := range map[string]bool{"openai": true, "azure-openai": true, "x-ai": true, "groq": true, "openrouter": true, "fireworks-ai": true, "anthropic": false, "bedrock": false, "google": false, "vertex-ai": false, "cohere": false, "azure-ai": false, "mistral-ai": false, "openai-compatible": false} {
		if Native(slug) != want {
			t.Errorf("Native(%s) = %v", slug, !want)
		}
	}
}

// TestReplayLimit: the stored items one request replays (history and
// resolved references together) are bounded by MaxReplay; beyond it the
// request is a 400 naming the limit.
func TestReplayLimit(t *testing.T) {
	ctx := context.Background()
	s := NewStore(&certmagic.FileStorage{Path: t.TempDir()}, StoreConfig{MaxReplay: 4000, Now: func() time.Time { return time.Unix(1700000000, 0) }})
	big := strings.Repeat("x", 2500)
	r1 := turn(t, s, "ws", `{"model":"m","input":"hi"}`, big)
	r2 := turn(t, s, "ws", `{"model":"m","input":"again","previous_response_id":"`+r1.ID+`"}`, big)
	rec1, _ := s.Get(ctx, "ws", r1.ID)
	ref := `{"type":"item_reference","id":"` + itemID(rec1.Output[0]) + `"}`
	tests := []struct {
		name, body, param string
	}{
		{"history within the limit", `{"model":"m","input":"x","previous_response_id":"` + r1.ID + `"}`, ""},
		{"history beyond the limit", `{"model":"m","input":"x","previous_response_id":"` + r2.ID + `"}`, "previous_response_id"},
		{"a reference within the limit", `{"model":"m","input":[` + ref + `]}`, ""},
		{"references beyond the limit", `{"model":"m","input":[` + ref + `,` + ref + `,` + ref + `]}`, "input"},
		{"history and a reference beyond it together", `{"model":"m","input":[` + ref + `],"previous_response_id":"` + r1.ID + `"}`, "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := s.Replay(ctx, "ws", mustParse(t, tt.body))
			if tt.param == "" {
				if err != nil || len(items) == 0 {
					t.Fatalf("items %d err %v", len(items), err)
				}
				return
			}
			wantAPIError(t, err, http.StatusBadRequest, tt.param, "limit of 4000 bytes")
			if got := err.(interface{ Error() string }).Error(); strings.Contains(got, big[:100]) {
				t.Fatalf("the error quotes the history: %.200s", got)
			}
		})
	}
}
