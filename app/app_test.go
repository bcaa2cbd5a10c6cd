package app

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestReplaceStringsEmptyPlaceholders: an unset placeholder in api_key is
// reported (the key starts and answers 401 at use); anywhere else, such as
// an address, it fails the load, naming the field and placeholder, never a
// value.
func TestReplaceStringsEmptyPlaceholders(t *testing.T) {
	t.Setenv("APP_TEST_SET", "sk-app-test-value")
	tests := []struct {
		name      string
		s         providers.Settings
		wantUnset []unsetField
		wantErr   []string
	}{
		{name: "set", s: providers.Settings{APIKey: "{env.APP_TEST_SET}"}},
		{name: "literal", s: providers.Settings{APIKey: "sk-literal"}},
		{name: "unset api_key", s: providers.Settings{APIKey: "{env.APP_TEST_UNSET_XYZ}"}, wantUnset: []unsetField{{"api_key", "{env.APP_TEST_UNSET_XYZ}"}}},
		{name: "unset inside an address", s: providers.Settings{APIKey: "{env.APP_TEST_SET}", CustomHost: "http://h:{env.APP_TEST_UNSET_PORT}/v1"}, wantErr: []string{"custom_host", "APP_TEST_UNSET_PORT"}},
		{name: "unset cloud secret", s: providers.Settings{CloudAAccessKeyID: "{env.APP_TEST_SET}", CloudASecretAccessKey: "{env.APP_TEST_UNSET_SECRET}"}, wantErr: []string{"clouda_secret_access_key", "APP_TEST_UNSET_SECRET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			unset, err := replaceStrings(caddy.NewReplacer(), &s)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(unset) != len(tt.wantUnset) || (len(unset) > 0 && unset[0] != tt.wantUnset[0]) {
					t.Fatalf("unset %v, want %v", unset, tt.wantUnset)
				}
				if len(unset) > 0 && s.APIKey != "" {
					t.Fatalf("an unset api_key resolved to %q", s.APIKey)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "sk-app-test-value") {
				t.Fatalf("error holds a value: %v", err)
			}
		})
	}
}

func TestCheckCredentials(t *testing.T) {
	tests := []struct {
		s  providers.Settings
		ok bool
	}{
		{providers.Settings{}, true},
		{providers.Settings{CloudAAccessKeyID: "a", CloudASecretAccessKey: "b"}, true},
		{providers.Settings{CloudAAccessKeyID: "a", CloudASecretAccessKey: "b", CloudASessionToken: "c"}, true},
		{providers.Settings{CloudAAccessKeyID: "a"}, false},
		{providers.Settings{CloudASecretAccessKey: "b"}, false},
		{providers.Settings{CloudASessionToken: "c"}, false},
	}
	for i, tt := range tests {
		if err := checkCredentials(&tt.s); (err == nil) != tt.ok {
			t.Errorf("case %d: err %v", i, err)
		}
	}
}
