package bedrock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var signTime = time.Date(2024, 5, 1, 12, 30, 0, 0, time.UTC)

func testProvider() *Provider {
	p := New()
	p.now = func() time.Time { return signTime }
	return p
}

func keys() providers.Settings {
	return providers.Settings{Provider: Slug, CloudAAccessKeyID: "AKIDEXAMPLE", CloudASecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
}

func TestPrepare(t *testing.T) {
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name       string
		call       providers.Call
		settings   func(*providers.Settings)
		wantURL    string
		wantHeader map[string]string // "" value: must be absent
		wantSigned string            // SignedHeaders, when signed
		wantBody   string
	}{
		{
			name:       "converse, default region",
			call:       providers.Call{Op: providers.OpChat, Method: "POST", Path: "/chat/completions", Model: "anthropic.claude-3-haiku-20240307-v1:0", Body: []byte(chat)},
			wantURL:    "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
			wantHeader: map[string]string{"Content-Type": "application/json", "Accept": "application/json", "X-Amz-Date": "20240501T123000Z", "X-Amz-Security-Token": ""},
			wantSigned: "accept;content-length;content-type;host;x-amz-date",
			wantBody:   `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
		},
		{
			name: "converse-stream with session token and region",
			call: providers.Call{Op: providers.OpChat, Method: "POST", Path: "/chat/completions", Model: "us.amazon.nova-pro-v1:0", Stream: true, Body: []byte(chat)},
			settings: func(s *providers.Settings) {
				s.CloudARegion = "eu-west-3"
				s.CloudASessionToken = "FwoGZXIvYXdzEXAMPLE"
			},
			wantURL:    "https://bedrock-runtime.eu-west-3.amazonaws.com/model/us.amazon.nova-pro-v1%3A0/converse-stream",
			wantHeader: map[string]string{"Accept": "application/vnd.amazon.eventstream", "X-Amz-Security-Token": "FwoGZXIvYXdzEXAMPLE"},
			wantSigned: "accept;content-length;content-type;host;x-amz-date;x-amz-security-token",
		},
		{
			name:    "inference profile ARN is escaped",
			call:    providers.Call{Op: providers.OpChat, Method: "POST", Model: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0", Body: []byte(chat)},
			wantURL: "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse",
		},
		{
			name:     "custom host keeps its path prefix",
			call:     providers.Call{Op: providers.OpChat, Method: "POST", Model: "m:1", Body: []byte(chat)},
			settings: func(s *providers.Settings) { s.CustomHost = "http://127.0.0.1:8080/bedrock/" },
			wantURL:  "http://127.0.0.1:8080/bedrock/model/m%3A1/converse",
		},
		{
			name: "custom host default port is dropped",
			call: providers.Call{Op: providers.OpChat, Method: "POST", Model: "m", Body: []byte(chat)},
			settings: func(s *providers.Settings) {
				s.CustomHost = "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com:443"
			},
			wantURL: "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com/model/m/converse",
		},
		{
			name: "bedrock api key is a bearer token, unsigned",
			call: providers.Call{Op: providers.OpChat, Method: "POST", Model: "m", Body: []byte(chat)},
			settings: func(s *providers.Settings) {
				*s = providers.Settings{Provider: Slug, APIKey: "ABSKQmVkcm9ja0FQSUtleQ"}
			},
			wantURL:    "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse",
			wantHeader: map[string]string{"Authorization": "Bearer ABSKQmVkcm9ja0FQSUtleQ", "X-Amz-Date": ""},
		},
		{
			name:       "titan embeddings",
			call:       providers.Call{Op: providers.OpEmbeddings, Method: "POST", Model: "amazon.titan-embed-text-v2:0", Stream: true, Body: []byte(`{"model":"amazon.titan-embed-text-v2:0","input":"hello","dimensions":256}`)},
			wantURL:    "https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.titan-embed-text-v2%3A0/invoke",
			wantHeader: map[string]string{"Accept": "application/json"},
			wantBody:   `{"inputText":"hello","dimensions":256}`,
		},
		{
			name: "native path passes through, signed",
			call: providers.Call{Op: providers.OpProxy, Method: "POST", Path: "/guardrail/gr1/version/1/apply", RawQuery: "b=2&a=1",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"source":"INPUT","content":[]}`)},
			wantURL:    "https://bedrock-runtime.us-east-1.amazonaws.com/guardrail/gr1/version/1/apply?a=1&b=2",
			wantSigned: "content-length;content-type;host;x-amz-date",
			wantBody:   `{"source":"INPUT","content":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := keys()
			if tt.settings != nil {
				tt.settings(&s)
			}
			u := providers.Upstream{Header: http.Header{}}
			c := tt.call
			if err := testProvider().Prepare(&c, &s, &u); err != nil {
				t.Fatal(err)
			}
			if got := u.URL.String(); got != tt.wantURL {
				t.Fatalf("URL = %s\nwant  %s", got, tt.wantURL)
			}
			for k, v := range tt.wantHeader {
				if got := u.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.wantBody != "" && string(u.Body) != tt.wantBody {
				t.Errorf("body = %s\nwant   %s", u.Body, tt.wantBody)
			}
			if c.Op == providers.OpEmbeddings && c.Stream {
				t.Error("embeddings must not be treated as a stream")
			}
			if s.CloudAAccessKeyID == "" {
				return
			}
			auth := u.Header.Get("Authorization")
			region := s.CloudARegion
			if region == "" {
				region = DefaultRegion
			}
			wantPrefix := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240501/" + region + "/bedrock/aws4_request, SignedHeaders="
			if !strings.HasPrefix(auth, wantPrefix) {
				t.Fatalf("Authorization = %q", auth)
			}
			if tt.wantSigned != "" && !strings.Contains(auth, "SignedHeaders="+tt.wantSigned+",") {
				t.Fatalf("Authorization = %q, want SignedHeaders=%s", auth, tt.wantSigned)
			}
			if err := independentVerify(u, s.CloudASecretAccessKey); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	chat := providers.Call{Op: providers.OpChat, Model: "m", Body: []byte(`{"messages":[{"role":"user","content":"x"}]}`)}
	tests := []struct {
		name       string
		call       providers.Call
		settings   func(*providers.Settings)
		wantStatus int
		wantParam  string
	}{
		{"bad region", chat, func(s *providers.Settings) { s.CloudARegion = "evil.example#" }, 400, "clouda_region"},
		{"no credentials", chat, func(s *providers.Settings) { *s = providers.Settings{Provider: Slug} }, 401, ""},
		{"key without secret", chat, func(s *providers.Settings) { s.CloudASecretAccessKey = "" }, 401, ""},
		{"no model", providers.Call{Op: providers.OpChat, Body: chat.Body}, nil, 400, "model"},
		{"no embedding model", providers.Call{Op: providers.OpEmbeddings, Body: []byte(`{"input":"x"}`)}, nil, 400, "model"},
		{"completions unsupported", providers.Call{Op: providers.OpCompletions, Model: "m", Body: []byte(`{}`)}, nil, 400, ""},
		{"bad custom host", chat, func(s *providers.Settings) { s.CustomHost = "ftp://x" }, 400, "custom_host"},
		{"bad chat body", providers.Call{Op: providers.OpChat, Model: "m", Body: []byte(`{"messages":[]}`)}, nil, 400, "messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := keys()
			if tt.settings != nil {
				tt.settings(&s)
			}
			c := tt.call
			err := testProvider().Prepare(&c, &s, &providers.Upstream{Header: http.Header{}})
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != tt.wantStatus {
				t.Fatalf("err = %v, want status %d", err, tt.wantStatus)
			}
			if tt.wantParam != "" && ae.Param != tt.wantParam {
				t.Fatalf("param = %v, want %s", ae.Param, tt.wantParam)
			}
			if strings.Contains(ae.Message, "wJalrXUtnFEMI") {
				t.Fatal("error leaks the secret")
			}
		})
	}
}

func TestEscapeModelID(t *testing.T) {
	for in, want := range map[string]string{
		"anthropic.claude-v2":     "anthropic.claude-v2",
		"a:b/c d~e_f":             "a%3Ab%2Fc%20d~e_f",
		"arn:aws:bedrock:x/y+z%1": "arn%3Aaws%3Abedrock%3Ax%2Fy%2Bz%251",
	} {
		if got := EscapeModelID(in); got != want {
			t.Errorf("EscapeModelID(%q) = %q, want %q", in, got, want)
		}
	}
}

// independentVerify recomputes the SigV4 signature of u from scratch,
// following the published algorithm rather than the SDK's signer, so a
// misuse of the signer (an unescaped path, an unsigned header) shows up.
func independentVerify(u providers.Upstream, secret string) error {
	auth := u.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("not SigV4: %q", auth)
	}
	f := map[string]string{}
	for _, kv := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	scope := strings.SplitN(f["Credential"], "/", 2)[1]
	parts := strings.Split(scope, "/")
	date, region, service := parts[0], parts[1], parts[2]

	// Canonical URI: every segment of the escaped path, URI-encoded again.
	segs := strings.Split(u.URL.EscapedPath(), "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	q, _ := url.ParseQuery(u.URL.RawQuery)
	var qs []string
	for k, vs := range q {
		for _, v := range vs {
			qs = append(qs, uriEncode(k)+"="+uriEncode(v))
		}
	}
	sort.Strings(qs)
	var ch strings.Builder
	for _, h := range strings.Split(f["SignedHeaders"], ";") {
		v := u.Header.Get(h)
		switch h {
		case "host":
			v = u.URL.Host
		case "content-length":
			v = fmt.Sprint(len(u.Body))
		}
		ch.WriteString(h + ":" + strings.TrimSpace(v) + "\n")
	}
	sum := sha256.Sum256(u.Body)
	canonical := strings.Join([]string{u.Method, strings.Join(segs, "/"), strings.Join(qs, "&"), ch.String(), f["SignedHeaders"], hex.EncodeToString(sum[:])}, "\n")
	cr := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + u.Header.Get("X-Amz-Date") + "\n" + scope + "\n" + hex.EncodeToString(cr[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac(mac(mac(mac([]byte("AWS4"+secret), date), region), service), "aws4_request")
	if sig := hex.EncodeToString(mac(k, toSign)); sig != f["Signature"] {
		return fmt.Errorf("signature mismatch: canonical request\n%s", canonical)
	}
	return nil
}

func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func BenchmarkBedrockSign(b *testing.B) {
	p := testProvider()
	s := keys()
	s.CloudASessionToken = "FwoGZXIvYXdzEXAMPLE"
	body := readTestdata(b, "converse_request.json")
	target, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com")
	target.Path, target.RawPath = modelPath("anthropic.claude-3-7-sonnet-20250219-v1:0", "/converse")
	b.ReportAllocs()
	for b.Loop() {
		u := providers.Upstream{Method: "POST", URL: target, Body: body, Header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}}
		if err := p.Sign(&u, &s, "us-east-1"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSignNeverReusesAnotherSecret guards against the SDK signer's
// derived-key cache, which is keyed by region and service and checked
// only against the access key id: a request naming a known access key id
// with a wrong secret must not be signed with the owner's key, nor poison
// the owner's next signature.
func TestSignNeverReusesAnotherSecret(t *testing.T) {
	p := testProvider()
	sign := func(secret string) string {
		s := keys()
		s.CloudASecretAccessKey = secret
		c := providers.Call{Op: providers.OpChat, Model: "m", Body: []byte(`{"messages":[{"role":"user","content":"x"}]}`)}
		u := providers.Upstream{Header: http.Header{}}
		if err := p.Prepare(&c, &s, &u); err != nil {
			t.Fatal(err)
		}
		if err := independentVerify(u, secret); err != nil {
			t.Fatalf("secret %q: %v", secret, err)
		}
		return u.Header.Get("Authorization")
	}
	owner := sign("owner-secret")
	attacker := sign("guessed-secret")
	if owner == attacker {
		t.Fatal("a wrong secret produced the owner's signature")
	}
	if again := sign("owner-secret"); again != owner {
		t.Fatal("the owner's signature changed after another secret was used")
	}
}
