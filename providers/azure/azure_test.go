package azure

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A syntactically real Entra ID token shape (header.payload.signature).
var entraToken = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"RS256","kid":"k"}`)) + "." +
	base64.RawURLEncoding.EncodeToString([]byte(`{"aud":"https://cognitiveservices.azure.com"}`)) + ".c2lnbmF0dXJl"

const chatBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

func chatCall() providers.Call {
	return providers.Call{Op: providers.OpChat, Method: "POST", Path: "/chat/completions", Model: "gpt-4o", Body: []byte(chatBody)}
}

func TestOpenAIPrepare(t *testing.T) {
	base := providers.Settings{Provider: SlugOpenAI, APIKey: "0123456789abcdef0123456789abcdef", ResourceName: "contoso", DeploymentID: "gpt4o-prod", APIVersion: "2024-10-21"}
	deployments := []providers.Deployment{
		{DeploymentID: "dep-mini", Alias: "gpt-4o-mini", APIVersion: "2024-08-01-preview"},
		{DeploymentID: "dep-main", Alias: "gpt-4o", APIVersion: "2024-10-21", IsDefault: true},
	}
	tests := []struct {
		name       string
		call       func(*providers.Call)
		settings   func(*providers.Settings)
		wantURL    string
		wantHeader map[string]string
		wantBody   string
		wantUsage  bool // stream_options.include_usage added
	}{
		{
			name:       "chat with api-key",
			wantURL:    "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
			wantHeader: map[string]string{"Api-Key": "0123456789abcdef0123456789abcdef", "Authorization": ""},
			wantBody:   chatBody,
		},
		{
			name:       "entra token is a bearer",
			settings:   func(s *providers.Settings) { s.APIKey = entraToken },
			wantURL:    "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
			wantHeader: map[string]string{"Authorization": "Bearer " + entraToken, "Api-Key": ""},
		},
		{
			name: "realtime session on a dated (preview) version",
			call: func(c *providers.Call) {
				c.Op, c.Method, c.Path, c.RawQuery, c.Model, c.Body = providers.OpProxy, "GET", "/realtime", "model=gpt-realtime", "gpt-realtime", nil
			},
			settings:   func(s *providers.Settings) { s.DeploymentID, s.APIVersion = "rt-dep", "2024-10-01-preview" },
			wantURL:    "https://contoso.openai.azure.com/openai/realtime?api-version=2024-10-01-preview&deployment=rt-dep",
			wantHeader: map[string]string{"Api-Key": "0123456789abcdef0123456789abcdef"},
		},
		{
			name: "realtime session on the v1 (GA) API, the alias resolved",
			call: func(c *providers.Call) {
				c.Op, c.Method, c.Path, c.RawQuery, c.Model, c.Body = providers.OpProxy, "GET", "/realtime", "model=gpt-realtime", "gpt-realtime", nil
			},
			settings: func(s *providers.Settings) {
				s.DeploymentID, s.APIVersion = "", "v1"
				s.Deployments = []providers.Deployment{{DeploymentID: "rt-dep", Alias: "gpt-realtime", IsDefault: true}}
			},
			wantURL: "https://contoso.openai.azure.com/openai/v1/realtime?model=rt-dep",
		},
		{
			name: "realtime session without a deployment list: the model names it",
			call: func(c *providers.Call) {
				c.Op, c.Method, c.Path, c.RawQuery, c.Model, c.Body = providers.OpProxy, "GET", "/realtime", "model=my-rt", "my-rt", nil
			},
			settings: func(s *providers.Settings) { s.DeploymentID, s.APIVersion = "", "2024-10-01-preview" },
			wantURL:  "https://contoso.openai.azure.com/openai/realtime?api-version=2024-10-01-preview&deployment=my-rt",
		},
		{
			name: "embeddings keep the client query",
			call: func(c *providers.Call) {
				c.Op, c.Path, c.RawQuery, c.Body = providers.OpEmbeddings, "/embeddings", "api-version=old&x=1", []byte(`{"input":"a"}`)
			},
			wantURL: "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/embeddings?api-version=2024-10-21&x=1",
		},
		{
			name: "audio transcription is deployment scoped",
			call: func(c *providers.Call) {
				c.Op, c.Path, c.Body = providers.OpTranscriptions, "/audio/transcriptions", []byte("--b\r\n")
			},
			wantURL: "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/audio/transcriptions?api-version=2024-10-21",
		},
		{
			name: "files pass through per resource",
			call: func(c *providers.Call) {
				c.Op, c.Method, c.Path, c.Body = providers.OpProxy, "GET", "/files/file-1", nil
			},
			wantURL: "https://contoso.openai.azure.com/openai/files/file-1?api-version=2024-10-21",
		},
		{
			name:     "deployments alias picks deployment and version",
			call:     func(c *providers.Call) { c.Model = "gpt-4o-mini" },
			settings: func(s *providers.Settings) { s.DeploymentID, s.APIVersion, s.Deployments = "", "", deployments },
			wantURL:  "https://contoso.openai.azure.com/openai/deployments/dep-mini/chat/completions?api-version=2024-08-01-preview",
		},
		{
			name:     "deployments default",
			call:     func(c *providers.Call) { c.Model = "something-else" },
			settings: func(s *providers.Settings) { s.DeploymentID, s.APIVersion, s.Deployments = "", "", deployments },
			wantURL:  "https://contoso.openai.azure.com/openai/deployments/dep-main/chat/completions?api-version=2024-10-21",
		},
		{
			name:     "v1 API has no deployment nor api-version",
			settings: func(s *providers.Settings) { s.APIVersion, s.DeploymentID = "v1", "" },
			wantURL:  "https://contoso.openai.azure.com/openai/v1/chat/completions",
			wantBody: chatBody,
		},
		{
			name:     "preview API sends api-version=preview",
			settings: func(s *providers.Settings) { s.APIVersion = "preview" },
			wantURL:  "https://contoso.openai.azure.com/openai/v1/chat/completions?api-version=preview",
		},
		{
			name: "v1 API with an alias sends the deployment as model",
			call: func(c *providers.Call) { c.Model = "gpt-4o-mini" },
			settings: func(s *providers.Settings) {
				s.DeploymentID = ""
				s.Deployments = []providers.Deployment{{DeploymentID: "dep-mini", Alias: "gpt-4o-mini", APIVersion: "v1"}}
			},
			wantURL:  "https://contoso.openai.azure.com/openai/v1/chat/completions",
			wantBody: `{"model":"dep-mini","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:     "model-name header sets the body model",
			settings: func(s *providers.Settings) { s.CloudBModelName = "gpt-4o-2024-11-20" },
			wantURL:  "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
			wantBody: `{"model":"gpt-4o-2024-11-20","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name:     "custom host with a path replaces the whole base",
			settings: func(s *providers.Settings) { s.ResourceName, s.CustomHost = "", "http://127.0.0.1:9000/azure/openai/" },
			wantURL:  "http://127.0.0.1:9000/azure/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
		},
		{
			name:     "custom host without a path gets /openai",
			settings: func(s *providers.Settings) { s.ResourceName, s.CustomHost = "", "http://127.0.0.1:9000" },
			wantURL:  "http://127.0.0.1:9000/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
		},
		{
			name: "streams ask for usage on recent versions",
			call: func(c *providers.Call) {
				c.Stream, c.Body = true, []byte(`{"model":"gpt-4o","stream":true,"messages":[]}`)
			},
			wantURL:   "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
			wantBody:  `{"model":"gpt-4o","stream":true,"messages":[],"stream_options":{"include_usage":true}}`,
			wantUsage: true,
		},
		{
			name:     "streams on old versions are left alone",
			call:     func(c *providers.Call) { c.Stream, c.Body = true, []byte(`{"stream":true}`) },
			settings: func(s *providers.Settings) { s.APIVersion = "2024-02-01" },
			wantURL:  "https://contoso.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-02-01",
			wantBody: `{"stream":true}`,
		},
		{
			name:     "deployment names are path-escaped",
			settings: func(s *providers.Settings) { s.DeploymentID = "my dep" },
			wantURL:  "https://contoso.openai.azure.com/openai/deployments/my%20dep/chat/completions?api-version=2024-10-21",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := base, chatCall()
			if tt.settings != nil {
				tt.settings(&s)
			}
			if tt.call != nil {
				tt.call(&c)
			}
			u := providers.Upstream{Header: http.Header{}}
			if err := (OpenAI{}).Prepare(&c, &s, &u); err != nil {
				t.Fatal(err)
			}
			if got := u.URL.String(); got != tt.wantURL {
				t.Fatalf("URL = %s\nwant  %s", got, tt.wantURL)
			}
			if u.Method != c.Method {
				t.Fatalf("method = %s", u.Method)
			}
			for k, v := range tt.wantHeader {
				if got := u.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.wantBody != "" && string(u.Body) != tt.wantBody {
				t.Errorf("body = %s\nwant   %s", u.Body, tt.wantBody)
			}
			if c.UsageAdded != tt.wantUsage {
				t.Errorf("UsageAdded = %v", c.UsageAdded)
			}
		})
	}
	if (OpenAI{}).Translator(providers.OpChat) != nil {
		t.Fatal("azure-openai must pass OpenAI's format through")
	}
}

func TestOpenAIPrepareErrors(t *testing.T) {
	tests := []struct {
		name       string
		s          providers.Settings
		wantStatus int
		wantParam  string
		wantMsg    string
	}{
		{"no key", providers.Settings{ResourceName: "r", DeploymentID: "d", APIVersion: "v1"}, 401, "", "no credentials"},
		{"no resource", providers.Settings{APIKey: "k", DeploymentID: "d", APIVersion: "2024-10-21"}, 400, "resource_name", "resource_name"},
		{"bad resource", providers.Settings{APIKey: "k", ResourceName: "evil.com/x", DeploymentID: "d", APIVersion: "2024-10-21"}, 400, "resource_name", "invalid"},
		{"no deployment", providers.Settings{APIKey: "k", ResourceName: "r", APIVersion: "2024-10-21"}, 400, "deployment_id", "deployment_id"},
		{"no version", providers.Settings{APIKey: "k", ResourceName: "r", DeploymentID: "d"}, 400, "api_version", "api_version"},
		{"unknown alias", providers.Settings{APIKey: "k", ResourceName: "r", Deployments: []providers.Deployment{
			{DeploymentID: "a", Alias: "small", APIVersion: "v1"}, {DeploymentID: "b", Alias: "big", APIVersion: "v1"}}},
			400, "model", `model "gpt-4o" matches no deployment alias (known aliases: big, small)`},
		{"bad custom host", providers.Settings{APIKey: "k", CustomHost: "not a url", DeploymentID: "d", APIVersion: "v1"}, 400, "custom_host", "custom_host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := chatCall()
			err := (OpenAI{}).Prepare(&c, &tt.s, &providers.Upstream{Header: http.Header{}})
			checkErr(t, err, tt.wantStatus, tt.wantParam, tt.wantMsg)
		})
	}
}

func TestAIPrepare(t *testing.T) {
	tests := []struct {
		name       string
		s          providers.Settings
		call       func(*providers.Call)
		wantURL    string
		wantHeader map[string]string
	}{
		{
			name:       "serverless",
			s:          providers.Settings{APIKey: "key1", CloudBDeploymentType: "serverless", CloudBEndpointName: "Meta-Llama-3-8B-abcd", CloudBRegion: "eastus2"},
			wantURL:    "https://meta-llama-3-8b-abcd.eastus2.models.ai.azure.com/v1/chat/completions",
			wantHeader: map[string]string{"Authorization": "Bearer key1", "Api-Key": ""},
		},
		{
			name:    "serverless from deployment name, with api version",
			s:       providers.Settings{APIKey: "key1", CloudBDeploymentType: "serverless", CloudBDeploymentName: "Phi-4", CloudBRegion: "swedencentral", CloudBAPIVersion: "2024-05-01-preview"},
			call:    func(c *providers.Call) { c.Op, c.Path = providers.OpEmbeddings, "/embeddings" },
			wantURL: "https://phi-4.swedencentral.models.ai.azure.com/v1/embeddings?api-version=2024-05-01-preview",
		},
		{
			name:       "managed picks the deployment by header",
			s:          providers.Settings{APIKey: "key2", CloudBDeploymentType: "managed", CloudBEndpointName: "my-endpoint", CloudBRegion: "westus3", CloudBDeploymentName: "blue"},
			wantURL:    "https://my-endpoint.westus3.inference.ml.azure.com/v1/chat/completions",
			wantHeader: map[string]string{"Authorization": "Bearer key2", "Azureml-Model-Deployment": "blue"},
		},
		{
			name:       "foundry resource",
			s:          providers.Settings{APIKey: "key3", ResourceName: "contoso-ai"},
			wantURL:    "https://contoso-ai.services.ai.azure.com/models/chat/completions?api-version=2024-05-01-preview",
			wantHeader: map[string]string{"Api-Key": "key3", "Authorization": ""},
		},
		{
			name:       "foundry resource with entra token",
			s:          providers.Settings{APIKey: entraToken, ResourceName: "contoso-ai", CloudBAPIVersion: "2025-01-01"},
			wantURL:    "https://contoso-ai.services.ai.azure.com/models/chat/completions?api-version=2025-01-01",
			wantHeader: map[string]string{"Authorization": "Bearer " + entraToken, "Api-Key": ""},
		},
		{
			name:    "custom host alone",
			s:       providers.Settings{APIKey: "k", CustomHost: "http://127.0.0.1:7000"},
			wantURL: "http://127.0.0.1:7000/v1/chat/completions",
		},
		{
			name:    "custom host path replaces the prefix",
			s:       providers.Settings{APIKey: "k", CloudBDeploymentType: "managed", CustomHost: "http://127.0.0.1:7000/score"},
			wantURL: "http://127.0.0.1:7000/score/chat/completions",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := chatCall()
			if tt.call != nil {
				tt.call(&c)
			}
			u := providers.Upstream{Header: http.Header{}}
			if err := (AI{}).Prepare(&c, &tt.s, &u); err != nil {
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
			if string(u.Body) != string(c.Body) {
				t.Errorf("body changed: %s", u.Body)
			}
		})
	}
}

func TestAIPrepareErrors(t *testing.T) {
	tests := []struct {
		name       string
		s          providers.Settings
		wantStatus int
		wantParam  string
	}{
		{"no key", providers.Settings{CloudBDeploymentType: "serverless", CloudBEndpointName: "e", CloudBRegion: "r"}, 401, ""},
		{"no type", providers.Settings{APIKey: "k", CloudBEndpointName: "e"}, 400, "cloudb_deployment_type"},
		{"bad type", providers.Settings{APIKey: "k", CloudBDeploymentType: "dedicated"}, 400, "cloudb_deployment_type"},
		{"serverless without endpoint", providers.Settings{APIKey: "k", CloudBDeploymentType: "serverless", CloudBRegion: "r"}, 400, "cloudb_endpoint_name"},
		{"serverless without region", providers.Settings{APIKey: "k", CloudBDeploymentType: "serverless", CloudBEndpointName: "e"}, 400, "cloudb_region"},
		{"managed without endpoint", providers.Settings{APIKey: "k", CloudBDeploymentType: "managed", CloudBRegion: "r"}, 400, "cloudb_endpoint_name"},
		{"managed without region", providers.Settings{APIKey: "k", CloudBDeploymentType: "managed", CloudBEndpointName: "e"}, 400, "cloudb_region"},
		{"host injection", providers.Settings{APIKey: "k", CloudBDeploymentType: "serverless", CloudBEndpointName: "e", CloudBRegion: "x.evil.com#"}, 400, "cloudb_region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := chatCall()
			err := (AI{}).Prepare(&c, &tt.s, &providers.Upstream{Header: http.Header{}})
			checkErr(t, err, tt.wantStatus, tt.wantParam, "")
		})
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for key, want := range map[string]bool{
		entraToken:                         true,
		"0123456789abcdef0123456789abcdef": false,
		"a.b.c":                            false,
		"eyJhbGciOiJub25lIn0..":            false,
		"eyJhbGciOiJub25lIn0.e30.":         true,
		"":                                 false,
	} {
		if got := LooksLikeJWT(key); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", key, got, want)
		}
	}
}

func checkErr(t *testing.T, err error, status int, param, msg string) {
	t.Helper()
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != status {
		t.Fatalf("err = %v, want status %d", err, status)
	}
	if param != "" && ae.Param != param {
		t.Fatalf("param = %v, want %s", ae.Param, param)
	}
	if msg != "" && !strings.Contains(ae.Message, msg) {
		t.Fatalf("message %q lacks %q", ae.Message, msg)
	}
}
