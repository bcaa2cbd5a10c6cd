package providers

import (
	"errors"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// TestBaseURL: every provider builds its base URL from a custom_host by
// one rule (CustomBase), so the same value means the same upstream for
// all of them and a scheme other than http or https is always refused.
func TestBaseURL(t *testing.T) {
	cases := []struct{ custom, defPath, want string }{
		{"", "/v1", "https://def/v1"},
		{"http://127.0.0.1:8080", "/v1", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/", "/v1", "http://127.0.0.1:8080/v1"},
		{"https://proxy/anthropic/v1/", "/v1", "https://proxy/anthropic/v1"},
		{"https://proxy?x=1#f", "/v1", "https://proxy/v1"},
		{"http://127.0.0.1:8080", "", "http://127.0.0.1:8080"},
		{"https://proxy/openai//", "/openai", "https://proxy/openai"},
		{"https://vpce-1.example:443", "", "https://vpce-1.example"},
		{"http://gpu:80/base", "", "http://gpu/base"},
		{"https://gpu:8443", "", "https://gpu:8443"},
		{"http://[::1]:80/v1", "", "http://[::1]/v1"},
		{"https://user:secret@proxy/v1", "", "https://proxy/v1"},
		{"HTTPS://Proxy.Example", "/v1", "https://Proxy.Example/v1"},
	}
	for _, tc := range cases {
		got, err := BaseURL(tc.custom, "https://def/v1", tc.defPath)
		if err != nil || got.String() != tc.want {
			t.Errorf("BaseURL(%q, %q) = %v, %v; want %s", tc.custom, tc.defPath, got, err, tc.want)
		}
	}
	for _, bad := range []string{"ftp://x", "not a url", "//nohost", "file:///etc/passwd", "127.0.0.1:8080", "javascript:alert(1)"} {
		_, err := BaseURL(bad, "https://def", "/v1")
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "custom_host" {
			t.Errorf("BaseURL(%q) = %v, want a 400 on custom_host", bad, err)
		}
	}
}

// TestMissingKey: every provider's credentials error is the same 401.
func TestMissingKey(t *testing.T) {
	for _, tc := range []struct{ provider, how string }{
		{"anthropic", "send Authorization: Bearer <key>"},
		{"bedrock", "clouda_access_key_id is set but clouda_secret_access_key is missing"},
	} {
		e := MissingKey(tc.provider, tc.how)
		if e.Status != 401 || e.Type != apierror.TypeAuthentication || e.Code != "missing_provider_key" ||
			e.Message != "no credentials for provider \""+tc.provider+"\": "+tc.how {
			t.Errorf("MissingKey(%q) = %+v", tc.provider, e)
		}
	}
}
