package app

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestUnmarshalModel: `model <alias> { config … }` takes a saved config id
// or an inline JSON object, and refuses what it cannot use.
func TestUnmarshalModel(t *testing.T) {
	tests := []struct {
		name, input    string
		config, inline string
		wantErr        bool
	}{
		{"saved id", "model team { \n config grp \n }", "grp", "", false},
		{"inline", "model team { \n config `{\"provider\":\"openai\"}` \n }", "", `{"provider":"openai"}`, false},
		{"no config", "model team { \n }", "", "", true},
		{"bad JSON", "model team { \n config `{nope` \n }", "", "", true},
		{"unknown option", "model team { \n target x \n }", "", "", true},
		{"no alias", "model { \n config grp \n }", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := new(App)
			d := caddyfile.NewTestDispenser(tt.input)
			d.Next()
			err := a.unmarshalModel(d)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			m := a.Models["team"]
			if m == nil || m.Config != tt.config || string(m.Inline) != tt.inline {
				t.Fatalf("got %+v", m)
			}
		})
	}
}
