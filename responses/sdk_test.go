package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// sdkEvents decodes a translated stream with openai-go's SSE decoder into
// its Responses event union, as an SDK user's client would.
func sdkEvents(t *testing.T, stream []byte) []responses.ResponseStreamEventUnion {
	t.Helper()
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(stream)),
	}
	s := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
	var out []responses.ResponseStreamEventUnion
	for s.Next() {
		out = append(out, s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("SDK stream error: %v", err)
	}
	return out
}

func translateStream(t *testing.T, r *Request, chat []byte, closeErr error) []byte {
	t.Helper()
	var out bytes.Buffer
	w := NewStreamWriter(&out, r)
	if _, err := w.Write(chat); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(closeErr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestStreamParsesWithSDK feeds every stream golden through openai-go:
// each event must decode with its type set, sequence numbers must count
// up from 0, the stream must end with exactly one terminal event, every
// delta must follow the output_item.added of its item, and the terminal
// response must hold every item from output_item.done and agree with the
// accumulated text and arguments.
func TestStreamParsesWithSDK(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, f := range files {
		if strings.HasSuffix(f, ".responses.sse") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, _ := os.ReadFile(f)
			events := sdkEvents(t, translateStream(t, mustParse(t, answerRequest), in, nil))
			if len(events) < 3 {
				t.Fatalf("only %d events", len(events))
			}
			added := map[string]bool{}
			done := map[int64]responses.ResponseOutputItemUnion{}
			text := map[string]string{}
			terminals := 0
			for i, e := range events {
				if e.SequenceNumber != int64(i) {
					t.Fatalf("event %d (%s) has sequence_number %d", i, e.Type, e.SequenceNumber)
				}
				switch e.Type {
				case "response.output_item.added":
					added[e.Item.ID] = true
				case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
					if !added[e.ItemID] {
						t.Fatalf("%s for %s before its output_item.added", e.Type, e.ItemID)
					}
					text[e.ItemID] += e.Delta
				case "response.output_item.done":
					done[e.OutputIndex] = e.Item
				case "response.completed", "response.incomplete", "response.failed":
					terminals++
					if i != len(events)-1 {
						t.Fatalf("terminal %s is not last", e.Type)
					}
					resp := e.Response
					if resp.ID != "resp_test" || resp.Object != "response" || resp.Model == "" {
						t.Fatalf("terminal response lacks id/object/model: %+v", resp)
					}
					if e.Type != "response.failed" {
						if len(resp.Output) != len(done) || len(resp.Output) == 0 {
							t.Fatalf("terminal output has %d items, %d were done", len(resp.Output), len(done))
						}
						for j, item := range resp.Output {
							if item.ID != done[int64(j)].ID {
								t.Fatalf("output[%d] is %s, done said %s", j, item.ID, done[int64(j)].ID)
							}
							switch item.Type {
							case "message":
								if got := item.Content[0].Text; got != text[item.ID] {
									t.Fatalf("message text %q, deltas %q", got, text[item.ID])
								}
							case "function_call":
								if item.Arguments.OfString != text[item.ID] || item.CallID == "" {
									t.Fatalf("function_call %+v, deltas %q", item, text[item.ID])
								}
							}
						}
					} else if resp.Error.Message == "" || resp.Status != "failed" {
						t.Fatalf("failed response without error: %+v", resp)
					}
				case "":
					t.Fatalf("event %d has no type", i)
				}
			}
			if terminals != 1 {
				t.Fatalf("%d terminal events", terminals)
			}
		})
	}
}

// TestAnswerParsesWithSDK unmarshals each answer golden into openai-go's
// responses.Response and checks the fields clients read.
func TestAnswerParsesWithSDK(t *testing.T) {
	chat, _ := os.ReadFile("testdata/answer/anthropic_tools.chat.json")
	resp, err := FromChat(chat, mustParse(t, answerRequest))
	if err != nil {
		t.Fatal(err)
	}
	var got responses.Response
	if err := json.Unmarshal(resp.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || got.OutputText() != "I'll check both cities." {
		t.Fatalf("status %q output_text %q", got.Status, got.OutputText())
	}
	if len(got.Output) != 4 || got.Output[0].Type != "reasoning" || got.Output[2].Type != "function_call" {
		t.Fatalf("output %+v", got.Output)
	}
	fc := got.Output[3]
	if fc.CallID != "toolu_01B" || fc.Name != "get_weather" || !json.Valid([]byte(fc.Arguments.OfString)) {
		t.Fatalf("function call %+v", fc)
	}
	u := got.Usage
	if u.InputTokens != 1320 || u.OutputTokens != 90 || u.TotalTokens != 1410 || u.InputTokensDetails.CachedTokens != 1000 {
		t.Fatalf("usage %+v", u)
	}
	if got.Instructions.OfString != "Be brief." || got.Metadata["k"] != "v" || got.MaxOutputTokens != 500 {
		t.Fatalf("echo fields: %+v", got)
	}
}
