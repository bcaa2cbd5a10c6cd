package integration

import (
	"strings"
	"testing"
)

// TestVirtualKeyEmptyCredentialFailsLoad: a virtual key whose address or
// cloud credential {env.VAR} is unset, or whose cloud credentials are half
// given, fails the config load with an error naming the key and the
// variable or field. (An unset api_key loads: see
// TestVirtualKeyUnsetAPIKeyAnswers401.)
func TestVirtualKeyEmptyCredentialFailsLoad(t *testing.T) {
	t.Setenv("TEST_SET_SECRET", "sk-startup-secret-value")
	tests := []struct {
		name, llm string
		want      []string
	}{
		{
			name: "unset variable inside a value",
			llm:  "virtual_key vk-host {\n\t\t\tprovider openai\n\t\t\tapi_key {env.TEST_SET_SECRET}\n\t\t\tcustom_host http://127.0.0.1:{env.TEST_UNSET_PORT_XYZ}\n\t\t}",
			want: []string{`virtual key "vk-host"`, "custom_host", "TEST_UNSET_PORT_XYZ"},
		},
		{
			name: "unset cloud secret",
			llm:  "virtual_key vk-clouda {\n\t\t\tprovider bedrock\n\t\t\tclouda_access_key_id AKIAEXAMPLE\n\t\t\tclouda_secret_access_key {env.TEST_UNSET_CLOUDA_SECRET_XYZ}\n\t\t\tclouda_region us-east-1\n\t\t}",
			want: []string{`virtual key "vk-clouda"`, "clouda_secret_access_key", "TEST_UNSET_CLOUDA_SECRET_XYZ"},
		},
		{
			name: "access key id without secret",
			llm:  "virtual_key vk-half {\n\t\t\tprovider bedrock\n\t\t\tclouda_access_key_id {env.TEST_SET_SECRET}\n\t\t\tclouda_region us-east-1\n\t\t}",
			want: []string{`virtual key "vk-half"`, "clouda_secret_access_key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tryLoad(site{LLM: tt.llm})
			if err == nil {
				t.Fatal("the config loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "sk-startup-secret-value") {
				t.Fatalf("error holds a secret: %v", err)
			}
		})
	}
	// With the variable set, the same key loads.
	t.Setenv("TEST_UNSET_PORT_XYZ", "9")
	loadSite(t, site{LLM: tests[0].llm})
}

// TestVirtualKeyUnsetAPIKeyAnswers401: a virtual key whose api_key
// placeholder is unset does not stop the gateway (the example starts
// without OPENAI_API_KEY for local models): the load warns, naming the key
// and the placeholder, and each request through it is a 401
// missing_provider_key that reaches no provider.
func TestVirtualKeyUnsetAPIKeyAnswers401(t *testing.T) {
	fake := newFakeOpenAI(t)
	loadSite(t, site{LLM: "virtual_key vk-unset {\n\t\t\tprovider openai\n\t\t\tapi_key {env.TEST_UNSET_PROVIDER_KEY_XYZ}\n\t\t\tcustom_host " + fake.URL + "\n\t\t}"})
	resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), "x-gateway-virtual-key", "vk-unset")
	r := refusalOf(t, resp.StatusCode, raw)
	if r.status != 401 || r.code != "missing_provider_key" {
		t.Fatalf("got %+v, want 401 missing_provider_key", r)
	}
	if n := fake.count(); n != 0 {
		t.Fatalf("the provider was called %d times", n)
	}
	log := readLog(t)
	if !strings.Contains(log, "virtual key credential is empty") || !strings.Contains(log, "vk-unset") || !strings.Contains(log, "TEST_UNSET_PROVIDER_KEY_XYZ") {
		t.Fatalf("no load warning naming the key and placeholder in the log")
	}
}

// TestTransportProxyProtocolRefused: the PROXY protocol would tell every
// provider the client's address; a transport asking for it fails the load.
func TestTransportProxyProtocolRefused(t *testing.T) {
	err := tryLoad(site{Gateway: "custom_host_allow loopback\n\t\t\ttransport http {\n\t\t\t\tproxy_protocol v2\n\t\t\t}"})
	if err == nil || !strings.Contains(err.Error(), "proxy_protocol is not supported") {
		t.Fatalf("load error %v, want proxy_protocol refused", err)
	}
}
