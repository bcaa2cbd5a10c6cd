package integration

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	googleKey   = "goog-test-key"
	vertexToken = "ya29.test-access-token"
)

// fakeGemini serves the Gemini API (/v1beta/models/…) and Vertex AI
// (/v1/projects/…/publishers/…) paths. It checks x-goog-api-key (and that
// no key is in the URL) for the former, the bearer token for the latter,
// and answers each method with its fixture.
type geminiReplies struct {
	Generate, Stream, Embed, Predict, Claude, ClaudeStream []byte
}

func fakeGemini(t testing.TB, r geminiReplies) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, req *http.Request, body []byte) {
		path := req.URL.Path
		vertex := strings.HasPrefix(path, "/v1/projects/")
		switch {
		case vertex && req.Header.Get("Authorization") != "Bearer "+vertexToken:
			writeJSON(w, 401, []byte(`{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`))
			return
		case !vertex && (req.Header.Get("x-goog-api-key") != googleKey || req.URL.Query().Has("key")):
			writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`))
			return
		case !json.Valid(body):
			writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`))
			return
		}
		if strings.Contains(path, "/models/overloaded") {
			writeJSON(w, 429, []byte(`[{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}]`))
			return
		}
		_, method, _ := strings.Cut(path[strings.LastIndexByte(path, '/'):], ":")
		switch method {
		case "generateContent":
			writeJSON(w, 200, r.Generate)
		case "streamGenerateContent":
			if req.URL.Query().Get("alt") != "sse" {
				writeJSON(w, 400, []byte(`{"error":{"code":400,"message":"this fake only streams SSE","status":"INVALID_ARGUMENT"}}`))
				return
			}
			replay(w, "text/event-stream", r.Stream)
		case "batchEmbedContents":
			writeJSON(w, 200, r.Embed)
		case "predict":
			writeJSON(w, 200, r.Predict)
		case "rawPredict":
			writeJSON(w, 200, r.Claude)
		case "streamRawPredict":
			replay(w, "text/event-stream", r.ClaudeStream)
		default:
			writeJSON(w, 404, []byte(`{"error":{"code":404,"message":"Not found","status":"NOT_FOUND"}}`))
		}
	})
}

// tokenEndpoint is a fake Google OAuth token endpoint. It verifies the
// JWT assertion's RS256 signature with the service account's public key
// and its scope, and counts the tokens it issued.
type tokenEndpoint struct {
	*fakeServer
	issued atomic.Int32
}

func fakeTokenEndpoint(t testing.TB, pub *rsa.PublicKey) *tokenEndpoint {
	te := &tokenEndpoint{}
	te.fakeServer = newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		form, _ := url.ParseQuery(string(body))
		parts := strings.Split(form.Get("assertion"), ".")
		if form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || len(parts) != 3 {
			writeJSON(w, 400, []byte(`{"error":"invalid_grant"}`))
			return
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil ||
			!strings.Contains(string(claims), `"scope":"https://www.googleapis.com/auth/cloud-platform"`) {
			writeJSON(w, 400, []byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
			return
		}
		te.issued.Add(1)
		writeJSON(w, 200, []byte(`{"access_token":"`+vertexToken+`","token_type":"Bearer","expires_in":3599}`))
	})
	return te
}

// newServiceAccount returns a service account JSON with a fresh RSA key,
// its token_uri pointing at a fake token endpoint, and that endpoint.
func newServiceAccount(t testing.TB, project string) (json.RawMessage, *tokenEndpoint) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	te := fakeTokenEndpoint(t, &key.PublicKey)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": project, "private_key_id": "test-key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gateway@" + project + ".iam.gserviceaccount.com", "client_id": "1234567890",
		"token_uri": te.URL + "/token",
	})
	return sa, te
}
