package ratelimit

import (
	"bytes"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// form returns a multipart body with the given fields (a "file" field is
// written as a file part) and its Content-Type.
func form(t *testing.T, fields ...string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		var w io.Writer
		var err error
		if fields[i] == "file" {
			w, err = mw.CreateFormFile("file", "a.wav")
		} else {
			w, err = mw.CreateFormField(fields[i])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, fields[i+1])
	}
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// TestReadBodyByContent checks that the model and the estimate come from
// what the body is, whatever its Content-Type says: before the fix a JSON
// body sent as text/plain or as curl's form encoding was not read at all
// (no model, no reservation), though the gateway served it as JSON.
func TestReadBodyByContent(t *testing.T) {
	const chat = `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	audio, audioCT := form(t, "file", strings.Repeat("\x00RIFF", 1000), "model", "whisper-1")
	late, lateCT := form(t, "file", "abc", "purpose", "x", "model", " gpt-4o-transcribe \n")
	bare, _ := form(t, "model", "whisper-1")
	tests := []struct {
		name, ct, body string
		model          string
		// estimate is the token reservation; -1 for the JSON chat's.
		estimate int64
	}{
		{"json", "application/json", chat, "gpt-4o", -1},
		{"no content type", "", chat, "gpt-4o", -1},
		{"text/plain", "text/plain", chat, "gpt-4o", -1},
		{"curl -d", "application/x-www-form-urlencoded", chat, "gpt-4o", -1},
		{"octet-stream", "application/octet-stream", chat, "gpt-4o", -1},
		{"JSON declared multipart", "multipart/form-data; boundary=xyz", chat, "gpt-4o", -1},
		{"audio form", audioCT, string(audio), "whisper-1", 0},
		{"model after the file", lateCT, string(late), "gpt-4o-transcribe", 0},
		{"form declared text/plain", "text/plain", string(bare), "whisper-1", 0},
		{"not JSON", "text/plain", "model=gpt-4o&x=1", "", (16 + 3) / 4},
		{"JSON array", "application/json", `[{"model":"gpt-4o"}]`, "", (20 + 3) / 4},
		{"too deep", "text/plain", `{"model":"gpt-4o","a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "", -2},
	}
	ctl := newControl()
	h := newHandler(t, ctl)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRequest("key-alice", []byte(tt.body), "Content-Type", tt.ct)
			if tt.ct == "" {
				r.Header.Del("Content-Type")
			}
			q := request{r: r, h: h}
			q.attrs.Pending = policies.PendingModel
			h.readBody(&q)
			if q.attrs.Model != tt.model || q.attrs.Pending != 0 {
				t.Fatalf("model %q (pending %v), want %q", q.attrs.Model, q.attrs.Pending, tt.model)
			}
			want := tt.estimate
			switch want {
			case -1:
				want = int64(len(tt.body)+3)/4 + 100
			case -2:
				want = int64(len(tt.body)+3) / 4
			}
			if got := estimateTokens(q.body, q.size); got != want {
				t.Fatalf("estimate %d, want %d", got, want)
			}
			// The gateway gets the same bytes, read once.
			shared, ok := ingress.Body(r)
			if !ok || string(shared) != tt.body {
				t.Fatalf("shared %v %q", ok, shared)
			}
			if b, _ := io.ReadAll(r.Body); string(b) != tt.body {
				t.Fatalf("the body left for the gateway is %q", b)
			}
		})
	}
}

// TestAdmitTextPlain runs a model policy and a token budget over a JSON
// body declared text/plain through admit: the model policy counts it and
// the token policy reserves its estimate.
func TestAdmitTextPlain(t *testing.T) {
	ctl := newControl()
	models := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 1, cond("model", "gpt-4o"), "api_key")
	addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPM, 1e6, cond("api_key", "*"), "api_key")
	h := newHandler(t, ctl)
	body := `{"model":"gpt-4o","max_tokens":50,"messages":[]}`
	for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		v, err := h.admit(newRequest("key-alice", []byte(body), "Content-Type", ct), nil)
		if err != nil || v == nil {
			t.Fatalf("%s: no policy matched (%v)", ct, err)
		}
		if i == 0 {
			if v.refused != nil || len(v.grants) != 2 {
				t.Fatalf("%s: %+v", ct, v)
			}
			for _, g := range v.grants {
				want := int64(1)
				if g.policy.ID != models.ID {
					want = estimateTokens([]byte(body), int64(len(body)))
				}
				if g.cost != want {
					t.Fatalf("%s: %s policy took %d, want %d", ct, g.policy.Type, g.cost, want)
				}
			}
			continue
		}
		if v.refused == nil || v.refused.policy.ID != models.ID {
			t.Fatalf("%s: the second gpt-4o request in a minute was not refused: %+v", ct, v)
		}
	}
}

func TestSniffBoundary(t *testing.T) {
	for in, want := range map[string]string{
		"--abc\r\nx":                            "abc",
		"--abc\nx":                              "abc",
		"--\r\n":                                "",
		"abc\r\n":                               "",
		"--a b\r\n":                             "",
		"--" + strings.Repeat("b", 71) + "\r\n": "",
		"--" + strings.Repeat("b", 70) + "\r\n": strings.Repeat("b", 70),
		"--abc":                                 "",
	} {
		if got := sniffBoundary([]byte(in)); got != want {
			t.Errorf("sniffBoundary(%q) = %q, want %q", in, got, want)
		}
	}
}
