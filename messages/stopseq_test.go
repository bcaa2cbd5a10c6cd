package messages

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// A chat answer that ended at a stop sequence says finish_reason "stop"
// and nothing else in OpenAI's format, so it is end_turn with a null
// stop_sequence; a provider that names the matched sequence (vLLM's
// stop_reason, SGLang's matched_stop) gives stop_sequence, but only for
// a sequence the request asked for. The same holds for streams.
func TestStopSequence(t *testing.T) {
	stops := []string{"\n\nHuman:", "END"}
	cases := []struct {
		name, choice string
		stops        []string
		reason, seq  string
	}{
		{"openai: no way to tell", `"finish_reason":"stop"`, stops, "end_turn", ""},
		{"vllm names it", `"finish_reason":"stop","stop_reason":"END"`, stops, "stop_sequence", "END"},
		{"vllm, a sequence with a line break", `"finish_reason":"stop","stop_reason":"\n\nHuman:"`, stops, "stop_sequence", "\n\nHuman:"},
		{"sglang names it", `"finish_reason":"stop","matched_stop":"END"`, stops, "stop_sequence", "END"},
		{"vllm end token id", `"finish_reason":"stop","stop_reason":128009`, stops, "end_turn", ""},
		{"vllm natural end", `"finish_reason":"stop","stop_reason":null`, stops, "end_turn", ""},
		{"a sequence not asked for", `"finish_reason":"stop","stop_reason":"STOP"`, stops, "end_turn", ""},
		{"no stop_sequences in the request", `"finish_reason":"stop","stop_reason":"END"`, nil, "end_turn", ""},
		{"length wins", `"finish_reason":"length","stop_reason":"END"`, stops, "max_tokens", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chat := `{"id":"c1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},` + c.choice + `}]}`
			got, err := FromChat([]byte(chat), "m", c.stops)
			if err != nil {
				t.Fatal(err)
			}
			checkStop(t, "answer", gjson.GetBytes(got, "stop_reason"), gjson.GetBytes(got, "stop_sequence"), c.reason, c.seq)

			var out bytes.Buffer
			s := NewStreamWriter(&out, "m", c.stops)
			in := chatSSE(`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null,"stop_reason":null}]}`,
				`{"id":"c1","model":"m","choices":[{"index":0,"delta":{},`+c.choice+`}]}`, `[DONE]`)
			if _, err := s.Write([]byte(in)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(nil); err != nil {
				t.Fatal(err)
			}
			var delta gjson.Result
			for _, ev := range strings.Split(out.String(), "\n\n") {
				if strings.HasPrefix(ev, "event: message_delta\n") {
					delta = gjson.Get(strings.TrimPrefix(ev, "event: message_delta\ndata: "), "delta")
				}
			}
			checkStop(t, "stream", delta.Get("stop_reason"), delta.Get("stop_sequence"), c.reason, c.seq)
		})
	}
}

func checkStop(t *testing.T, what string, reason, seq gjson.Result, wantReason, wantSeq string) {
	t.Helper()
	if reason.Str != wantReason || (wantSeq == "" && seq.Type != gjson.Null) || (wantSeq != "" && seq.Str != wantSeq) {
		t.Fatalf("%s: stop_reason %s, stop_sequence %s; want %s, %q", what, reason.Raw, seq.Raw, wantReason, wantSeq)
	}
}
