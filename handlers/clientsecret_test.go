package handlers

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClientSecretModel: a Realtime client secret's model is its
// session.model, which a key limited to models must name and may use.
func TestClientSecretModel(t *testing.T) {
	limited := &identity.Caller{AllowedModels: []string{"gpt-realtime*"}}
	open := &identity.Caller{}
	cases := []struct {
		name   string
		method string
		path   string
		body   string
		id     *identity.Caller
		model  string
		status int
	}{
		{"allowed model", "POST", clientSecretsPath, `{"session":{"type":"realtime","model":"gpt-realtime"}}`, limited, "gpt-realtime", 0},
		{"other model", "POST", clientSecretsPath, `{"session":{"model":"gpt-4o-realtime-preview"}}`, limited, "gpt-4o-realtime-preview", 403},
		{"escaped member name", "POST", clientSecretsPath, `{"session":{"\u006dodel":"o3"}}`, limited, "o3", 403},
		{"no model, limited key", "POST", clientSecretsPath, `{"session":{"type":"realtime"}}`, limited, "", 403},
		{"no body, limited key", "POST", clientSecretsPath, ``, limited, "", 403},
		{"no model, open key", "POST", clientSecretsPath, `{"expires_after":{"anchor":"created_at","seconds":600}}`, open, "", 0},
		{"model not a string", "POST", clientSecretsPath, `{"session":{"model":1}}`, open, "", 400},
		{"another path", "POST", "/realtime/calls", `{"session":{"model":"o3"}}`, limited, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call := &providers.Call{Method: c.method, Path: c.path, Body: []byte(c.body)}
			err := clientSecretModel(call)
			if err == nil {
				err = checkModel(c.id, call)
			}
			status := 0
			if err != nil {
				status = apierror.As(err).Status
			}
			if status != c.status || call.Model != c.model {
				t.Fatalf("status %d model %q (%v), want %d %q", status, call.Model, err, c.status, c.model)
			}
		})
	}
}
