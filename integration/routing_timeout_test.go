package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestTimeouts(t *testing.T) {
	up := newScripted(t)
	loadFresh(t, site{})
	tests := []struct {
		name    string
		script  reply
		config  string // extra target fields
		headers []string
		stream  bool
		status  int
	}{
		{"a non-stream answer must complete in time", reply{partial: `{"id":"chatcmpl-1","choices":[`}, `"request_timeout":100`, nil, false, 408},
		{"a stream must start in time", reply{hang: true}, `"request_timeout":100`, nil, true, 408},
		{"the header wins over the config", reply{hang: true}, `"request_timeout":600000`,
			[]string{"x-gateway-request-timeout", "100"}, false, 408},
		{"an answer in time", reply{}, `"request_timeout":5000`, nil, false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.set(tt.script)
			body := chatBody
			if tt.stream {
				body = `{"model":"m","stream":true,"messages":[]}`
			}
			h := append([]string{"x-gateway-config", compactJSON(t, target(up.fakeOpenAI, tt.config))}, tt.headers...)
			resp, raw := do(t, "POST", "/chat/completions", []byte(body), h...)
			if tt.status == 408 {
				assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 408, "timeout_error")
				if got := lastAttempts(t); got != "config:timeout:408" {
					t.Fatalf("attempts %s", got)
				}
				return
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
		})
	}
}

// TestSlowStreamNotCut: the stream starts at once, then each event takes
// longer than the request timeout; a started stream is never cut by it.
func TestSlowStreamNotCut(t *testing.T) {
	up := newScripted(t, reply{stream: []string{"a", "b", "c"}, pause: 150 * time.Millisecond})
	loadFresh(t, site{})
	client := newClient("x-gateway-config", compactJSON(t, target(up.fakeOpenAI, `"request_timeout":100`)))
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("m"))
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream cut: %v", err)
	}
	if text.String() != "abc" {
		t.Fatalf("text %q", text.String())
	}
}
