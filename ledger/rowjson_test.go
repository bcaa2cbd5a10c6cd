package ledger

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"

	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestRowJSON: the hand-written metadata and detail objects are JSON that
// reads back as what was written, whatever the text holds (quotes,
// backslashes, control characters, non-ASCII), and detail leaves out only
// what is zero.
func TestRowJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "line\nfeed\r\t", "\x01\x1f\x7f", "héllo ☃ 𝄞", "</script>&"} {
		b := oaiwire.AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil || got != s {
			t.Errorf("%q encodes as %s, which reads back as %q (%v)", s, b, got, err)
		}
	}
	md := map[string]string{"b": "2", "a": `x"y`, "_user": "ü\n"}
	var got map[string]string
	if b := appendMetadata(nil, md); json.Unmarshal(b, &got) != nil || !reflect.DeepEqual(got, md) || string(b)[:9] != `{"_user":` {
		t.Errorf("metadata %s reads back as %v", b, got)
	}
	for _, r := range []Record{
		{Operation: "chat.completions"},
		{Operation: `we"ird`, Stream: true, CachedTokens: 1, CacheWriteTokens: 2, ReasoningTokens: 3, TTFT: 1500 * time.Microsecond, Retries: 4, Estimated: true},
	} {
		b := appendDetail(nil, &r)
		var back Record
		readDetail(&back, string(b))
		if !reflect.DeepEqual(back, r) {
			t.Errorf("detail %s reads back as %+v, want %+v", b, back, r)
		}
	}
	if b := appendDetail(nil, &Record{Operation: "embeddings"}); string(b) != `{"op":"embeddings"}` {
		t.Errorf("a detail of zeros is %s", b)
	}
}
