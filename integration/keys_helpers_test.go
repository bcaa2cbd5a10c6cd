package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// Keys of the keys API tests: an organisation admin and a workspace key
// of the same organisation, declared in the Caddyfile.
const (
	keysAdminKey  = "test-admin-key-0123456789abcdef"
	keysOrg       = "0b6f3e70-3c4a-4a59-9a51-6f7d7a1e2b01"
	keysWorkspace = "1c7a4f81-4d5b-4b6a-8b62-7a8e8b2f3c02"
	keysOtherWS   = "2d8b5a92-5e6c-4c7b-9c73-8b9f9c3a4d03"
	// keysEncryptionKey seals provider credentials (64 hex digits).
	keysEncryptionKey = "6f1c2a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170615f4e3"
)

// keysSite is a gateway with its own Caddy storage (so records of one
// test never show in another), an organisation admin key, the test key
// made a workspace key of the same organisation, and LLM added to the
// llm block.
type keysSite struct {
	LLM     string
	Storage string
	// NoEncryption leaves out the keys block's encryption key.
	NoEncryption bool
}

func newKeysSite(t *testing.T, llm string) *keysSite {
	t.Helper()
	os.Setenv("TEST_KEYS_ADMIN", keysAdminKey)
	os.Setenv("TEST_KEYS_ENC", keysEncryptionKey)
	return &keysSite{LLM: llm, Storage: t.TempDir()}
}

func (s *keysSite) caddyfile() string {
	enc := "encryption_key {env.TEST_KEYS_ENC}"
	if s.NoEncryption {
		enc = ""
	}
	llm := `api_key admin {env.TEST_KEYS_ADMIN} {
			organisation_id ` + keysOrg + `
			workspace_id ` + keysWorkspace + `
			type organisation
			scopes *
		}
		keys {
			` + enc + `
		}
		` + s.LLM
	cf := site{LLM: llm}.caddyfile()
	// The test key joins the admin's organisation.
	cf = strings.Replace(cf, "api_key test {env.TEST_GATEWAY_KEY}", "api_key test {env.TEST_GATEWAY_KEY} {\n\t\t\torganisation_id "+keysOrg+"\n\t\t\tworkspace_id "+keysWorkspace+"\n\t\t}", 1)
	return strings.Replace(cf, "persist_config off", "persist_config off\n\tstorage file_system "+s.Storage, 1)
}

func (s *keysSite) load(t *testing.T) {
	t.Helper()
	newHTTPPort()
	cfg, err := adapt(s.caddyfile())
	if err != nil {
		t.Fatalf("adapting: %v\n%s", err, s.caddyfile())
	}
	truncateLog()
	err = caddy.Load(cfg, true)
	// The old server closes its idle connections as the new config takes
	// over; a request on one of them would fail with EOF.
	http.DefaultClient.CloseIdleConnections()
	if err != nil {
		t.Fatalf("loading Caddyfile: %v\n%s", err, s.caddyfile())
	}
}

// as sends a control-plane or inference call with key as the gateway
// key, failing unless the status is want.
func as(t *testing.T, key, method, path, body string, want int, out any, headers ...string) []byte {
	t.Helper()
	return call(t, method, path, body, want, out, append([]string{"x-gateway-api-key", key}, headers...)...)
}

// errCode returns the error code of an error envelope.
func errCode(t *testing.T, raw []byte) string {
	t.Helper()
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("not an error envelope: %s", raw)
	}
	return env.Error.Code
}

// grepStore fails when any file of the storage directory holds a secret.
func grepStore(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		n++
		b, _ := os.ReadFile(p)
		for _, s := range secrets {
			if s != "" && strings.Contains(string(b), s) {
				t.Errorf("stored file %s holds a secret", p)
			}
		}
		return nil
	})
	if n == 0 {
		t.Fatal("the store is empty: nothing was grepped")
	}
}
