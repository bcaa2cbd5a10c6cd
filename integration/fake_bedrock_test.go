package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Credentials the fake Bedrock accepts.
const (
	bedrockAKID   = "AKIDTESTGATEWAY"
	bedrockSecret = "testSecret/K7MDENG+bPxRfiCYEXAMPLEKEY"
	bedrockAPIKey = "ABSKdGVzdC1iZWRyb2NrLWtleQ"
)

// fakeBedrock is bedrock-runtime speaking its real wire format: Converse
// (JSON), ConverseStream (binary event stream, replaying the transcripts in
// providers/bedrock/testdata) and InvokeModel for embedding models. It
// verifies every SigV4 signature by recomputing it from the received
// request with the known secret, and rejects mismatches with 403 as AWS
// does.
type fakeBedrock struct {
	*httptest.Server
	t  testing.TB
	mu sync.Mutex
	// seen records requests that passed authentication.
	seen []seenRequest
	// sessionToken, when set, must be presented and signed.
	sessionToken string
}

func newFakeBedrock(t testing.TB) *fakeBedrock {
	f := &fakeBedrock{t: t}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeBedrock) last() seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return seenRequest{}
	}
	return f.seen[len(f.seen)-1]
}

// bedrockError writes an AWS JSON error: the name in x-amzn-ErrorType,
// the message in the body.
func bedrockError(w http.ResponseWriter, status int, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", name+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("x-amzn-RequestId", "6f0c2ad5-6ad3-4b8e-9f5b-000000000000")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, msg)
}

func (f *fakeBedrock) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := f.authenticate(r, body); err != nil {
		bedrockError(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	f.mu.Unlock()

	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	if !ok || r.Method != http.MethodPost {
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation")
		return
	}
	escID, action, _ := strings.Cut(rest, "/")
	modelID, err := url.PathUnescape(escID)
	if err != nil || modelID == "bad-model" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "The provided model identifier is invalid.")
		return
	}
	switch action {
	case "converse":
		f.converse(w, body)
	case "converse-stream":
		f.converseStream(w, body)
	case "invoke":
		f.invoke(w, modelID, body)
	default:
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+action)
	}
}

// authenticate accepts a Bedrock API key as a bearer token, or a SigV4
// signature it recomputes with the AWS signer: only the headers named in
// SignedHeaders are taken from the request, so anything a proxy added
// afterwards is ignored, as AWS ignores it.
func (f *fakeBedrock) authenticate(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	if auth == "Bearer "+bedrockAPIKey {
		return nil
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("missing authentication token")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[0] != bedrockAKID || cred[3] != "bedrock" || cred[4] != "aws4_request" {
		return fmt.Errorf("the security token included in the request is invalid")
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("missing X-Amz-Date")
	}
	req := &http.Request{
		Method:        r.Method,
		URL:           &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Host:          r.Host,
		Header:        http.Header{},
		ContentLength: r.ContentLength,
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" && h != "content-length" {
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if f.sessionToken != "" && r.Header.Get("X-Amz-Security-Token") != f.sessionToken {
		return fmt.Errorf("the security token included in the request is invalid")
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: bedrockAKID, SecretAccessKey: bedrockSecret, SessionToken: f.sessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "bedrock", cred[2], signedAt); err != nil {
		return err
	}
	if req.Header.Get("Authorization") != auth {
		return fmt.Errorf("The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	return nil
}

// converseReq is the part of a Converse request the fake looks at.
type converseReq struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	ToolConfig json.RawMessage `json:"toolConfig"`
}

// lastUserText returns the request's last text block, which tests use to
// pick the fake's answer.
func lastUserText(body []byte) (string, error) {
	var req converseReq
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return "", err
	}
	text := ""
	for _, m := range req.Messages {
		for _, c := range m.Content {
			var b struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(c, &b) == nil && b.Text != "" {
				text = b.Text
			}
		}
	}
	return text, nil
}

func (f *fakeBedrock) converse(w http.ResponseWriter, body []byte) {
	text, err := lastUserText(body)
	if err != nil {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if strings.Contains(text, "weather") {
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Let me check."},{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":20,"outputTokens":9,"totalTokens":29},"metrics":{"latencyMs":100}}`)
		return
	}
	io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Hello from Bedrock!"}]}},"stopReason":"end_turn","usage":{"inputTokens":11,"outputTokens":4,"totalTokens":18,"cacheReadInputTokens":3},"metrics":{"latencyMs":100}}`)
}

// converseStream replays a transcript chosen by the last user text. It
// writes each frame in two pieces with a flush between, so the gateway
// receives frames split across reads.
func (f *fakeBedrock) converseStream(w http.ResponseWriter, body []byte) {
	text, err := lastUserText(body)
	if err != nil {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request")
		return
	}
	name := "stream_text"
	switch {
	case strings.Contains(text, "weather"):
		name = "stream_tools"
	case strings.Contains(text, "throttle"):
		name = "stream_exception"
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("x-amzn-RequestId", "6f0c2ad5-6ad3-4b8e-9f5b-000000000001")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	for _, fr := range bedrockTranscript(f.t, name) {
		half := len(fr) / 2
		w.Write(fr[:half])
		fl.Flush()
		w.Write(fr[half:])
		fl.Flush()
	}
}

func (f *fakeBedrock) invoke(w http.ResponseWriter, model string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(model, "amazon.titan-embed"):
		var req struct {
			InputText string `json:"inputText"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.InputText == "" {
			bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: "+fmt.Sprint(err))
			return
		}
		io.WriteString(w, `{"embedding":[0.25,-0.5,0.125],"inputTextTokenCount":2}`)
	case strings.HasPrefix(model, "cohere.embed"):
		var req struct {
			Texts     []string `json:"texts"`
			InputType string   `json:"input_type"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.InputType == "" || len(req.Texts) == 0 {
			bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request")
			return
		}
		vecs := make([]string, len(req.Texts))
		for i := range vecs {
			vecs[i] = fmt.Sprintf("[%d.5,-1.0]", i)
		}
		fmt.Fprintf(w, `{"id":"e1","embeddings":[%s],"response_type":"embeddings_floats","texts":[]}`, strings.Join(vecs, ","))
	default:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "unsupported model")
	}
}

// bedrockTranscript encodes providers/bedrock/testdata/<name>.events.json
// as event-stream frames, one byte slice per frame.
func bedrockTranscript(t testing.TB, name string) [][]byte {
	raw, err := os.ReadFile(filepath.Join("..", "providers", "bedrock", "testdata", name+".events.json"))
	if err != nil {
		t.Errorf("transcript %s: %v", name, err)
		return nil
	}
	var events []struct {
		Event     string          `json:"event"`
		Exception string          `json:"exception"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &events); err != nil {
		t.Errorf("transcript %s: %v", name, err)
		return nil
	}
	enc := eventstream.NewEncoder()
	var frames [][]byte
	for _, e := range events {
		var m eventstream.Message
		if e.Exception != "" {
			m.Headers.Set(":exception-type", eventstream.StringValue(e.Exception))
			m.Headers.Set(":message-type", eventstream.StringValue("exception"))
		} else {
			m.Headers.Set(":event-type", eventstream.StringValue(e.Event))
			m.Headers.Set(":message-type", eventstream.StringValue("event"))
		}
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Payload = e.Payload
		var buf bytes.Buffer
		if err := enc.Encode(&buf, m); err != nil {
			t.Errorf("encode: %v", err)
			return nil
		}
		frames = append(frames, buf.Bytes())
	}
	return frames
}
