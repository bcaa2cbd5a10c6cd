package messages

import (
	"os"
	"strings"
	"testing"
)

// streamToolsAnswer is what providers/anthropic/testdata/stream_tools.sse
// (Anthropic's documented stream: thinking with its signature, text, two
// tool calls whose input arrives in pieces, cache reads) adds up to.
const streamToolsAnswer = `{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
	`"content":[{"type":"thinking","thinking":"Two cities, two calls.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"},` +
	`{"type":"text","text":"Okay, let me check the weather.\n"},` +
	`{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{"city":"Paris"}},` +
	`{"type":"tool_use","id":"toolu_01B2","name":"get_weather","input":{"city":"Tokyo"}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,` +
	`"usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"input_tokens":472,"output_tokens":89}}`

// A complete native stream is stored as the answer it adds up to, and
// that answer replays as Anthropic's event sequence, which adds up to
// the same answer again; a text stream with a stop sequence, citations
// and a block of a type the gateway does not know keep theirs.
func TestAssembleAndSynthesizeStream(t *testing.T) {
	sse, err := os.ReadFile("../providers/anthropic/testdata/stream_tools.sse")
	if err != nil {
		t.Fatal(err)
	}
	other := events(
		[2]string{"message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,"stop_sequence":null,"container":null,"usage":{"input_tokens":12,"output_tokens":1}}}`},
		[2]string{"ping", pingEv},
		[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":[]}}`},
		[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"a","document_index":0,"start_char_index":0,"end_char_index":1}}}`},
		[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"One, "}}`},
		[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"two"}}`},
		[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		[2]string{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`},
		[2]string{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"three"},"usage":{"output_tokens":6}}`},
		[2]string{"message_stop", stopEv})
	otherAnswer := `{"id":"msg_2","type":"message","role":"assistant","model":"claude-haiku-4-5",` +
		`"content":[{"type":"text","text":"One, two","citations":[{"type":"char_location","cited_text":"a","document_index":0,"start_char_index":0,"end_char_index":1}]},{"type":"redacted_thinking","data":"EmwKAhgB"}],` +
		`"stop_reason":"stop_sequence","stop_sequence":"three","usage":{"input_tokens":12,"output_tokens":6},"container":null}`
	for _, c := range []struct{ name, sse, want string }{
		{"tools", string(sse), streamToolsAnswer},
		{"text", other, otherAnswer},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := AssembleStream([]byte(c.sse))
			if !ok || string(got) != c.want {
				t.Fatalf("assembled %v:\n%s\nwant\n%s", ok, got, c.want)
			}
			replay, ok := SynthesizeStream(got)
			if !ok {
				t.Fatal("no stream form")
			}
			again, ok := AssembleStream(replay)
			if !ok || string(again) != c.want {
				t.Fatalf("the replay adds up to %v:\n%s\nfrom\n%s", ok, again, replay)
			}
			var names []string
			for _, ev := range strings.Split(strings.TrimSuffix(string(replay), "\n\n"), "\n\n") {
				name, _, _ := strings.Cut(strings.TrimPrefix(ev, "event: "), "\n")
				names = append(names, name)
			}
			if names[0] != "message_start" || names[1] != "ping" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
				t.Fatalf("events %v", names)
			}
			if !strings.Contains(string(replay), `"usage":{"input_tokens":`) || !strings.Contains(string(replay), `"output_tokens":0}`) {
				t.Fatalf("message_start usage: %s", replay)
			}
		})
	}
	if !strings.Contains(func() string { r, _ := SynthesizeStream([]byte(streamToolsAnswer)); return string(r) }(),
		`"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}`) {
		t.Fatal("tool input is not replayed as input_json_delta")
	}
}

// Streams the cache cannot vouch for are not stored, and bodies that are
// not Messages answers have no stream form.
func TestAssembleStreamRefuses(t *testing.T) {
	start := [2]string{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":1}}}`}
	text := [2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`}
	end := [2]string{"message_stop", stopEv}
	trunc, _ := os.ReadFile("../providers/anthropic/testdata/stream_truncated.sse")
	failed, _ := os.ReadFile("../providers/anthropic/testdata/stream_error.sse")
	for name, sse := range map[string]string{
		"truncated":          string(trunc),
		"error event":        string(failed),
		"no message_start":   events(text, end),
		"block out of order": events(start, [2]string{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`}, end),
		"unknown delta":      events(start, text, [2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"future_delta","x":1}}`}, end),
		"delta to no block":  events(start, [2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`}, end),
		"tool input not JSON": events(start, [2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`},
			[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`}, end),
		"name and type differ": events(start, [2]string{"message_delta", `{"type":"message_stop"}`}, end),
		"not JSON":             "event: message_start\ndata: {\"type\":\n\n" + events(end),
	} {
		if got, ok := AssembleStream([]byte(sse)); ok {
			t.Errorf("%s: stored as %s", name, got)
		}
	}
	for _, body := range []string{`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`, `{"type":"message","content":"x"}`, `[1]`, `{"type":"message"`} {
		if got, ok := SynthesizeStream([]byte(body)); ok {
			t.Errorf("%s: replayed as %s", body, got)
		}
	}
}
