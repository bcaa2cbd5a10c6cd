package integration

import (
	"strings"
	"testing"
)

// TestVirtualKeyEmptyCredentialFailsLoad: a virtual key whose {env.VAR}
// is unset, or whose cloud credentials are half given, fails the config
// load with an error naming the key and the variable or field.
func TestVirtualKeyEmptyCredentialFailsLoad(t *testing.T) {
	t.Setenv("TEST_SET_SECRET", "sk-startup-secret-value")
	tests := []struct {
		name, llm string
		want      []string
	}{
		{
			name: "unset api key variable",
			llm:  "virtual_key vk-unset {\n\t\t\tprovider openai\n\t\t\tapi_key {env.TEST_UNSET_PROVIDER_KEY_XYZ}\n\t\t}",
			want: []string{`virtual key "vk-unset"`, "api_key", "TEST_UNSET_PROVIDER_KEY_XYZ"},
		},
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
	t.Setenv("TEST_UNSET_PROVIDER_KEY_XYZ", "sk-now-set")
	loadSite(t, site{LLM: tests[0].llm})
}

// TestTransportProxyProtocolRefused: the PROXY protocol would tell every
// provider the client's address; a transport asking for it fails the load.
func TestTransportProxyProtocolRefused(t *testing.T) {
	err := tryLoad(site{Gateway: "custom_host_allow loopback\n\t\t\ttransport http {\n\t\t\t\tproxy_protocol v2\n\t\t\t}"})
	if err == nil || !strings.Contains(err.Error(), "proxy_protocol is not supported") {
		t.Fatalf("load error %v, want proxy_protocol refused", err)
	}
}
