package observe

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// entryStart is the fixed start of the test entries; entryNow is when
// they are logged.
var (
	entryStart = time.Unix(1700000000, 0)
	entryNow   = entryStart.Add(847 * time.Microsecond)
)

// fullEntry sets every field an entry logs.
func fullEntry() *Entry {
	return &Entry{
		TraceID: "trace-8c1f", KeyName: "default", Workspace: "ws-1", Organisation: "org-1",
		VirtualKey: "openai-vk", Operation: providers.OpChat, Method: "POST", Path: "/chat/completions",
		Provider: "openai", Model: "gpt-4o-mini", ConfigID: "pc-1", Status: 200, Stream: true,
		CacheState: "MISS", Start: entryStart, FirstByte: entryStart.Add(835 * time.Microsecond),
		Usage:   &providers.Usage{PromptTokens: 50, CompletionTokens: 40, TotalTokens: 90, CachedTokens: 3, ReasoningTokens: 7},
		CostUSD: 0.0000315, CostKnown: true,
		Metadata: map[string]string{"user": "u\"1"},
		Attempts: []Attempt{
			{Target: "config.targets[0]", Provider: "openai", Status: 429, Duration: 1234567 * time.Nanosecond, Outcome: "retry"},
			{Target: "config.targets[1]", Provider: "azure-openai", Status: 200, Duration: 771 * time.Microsecond, Outcome: "ok"},
		},
		Error: "upstream <failed>",
		Extra: []zap.Field{zap.String("prompt_id", "p-1"), zap.Int("prompt_version", 3), zap.Any("hook_results", json.RawMessage(`{"a":1}`))},
	}
}

// entryCases are entries whose two log shapes are pinned below, byte for
// byte: what the access log's llm object and the gateway's own entry say
// must not change when their encoding does.
var entryCases = []struct {
	name   string
	entry  func() *Entry
	object string // the access log's llm object
}{
	{"full", fullEntry,
		`{"llm":{"trace_id":"trace-8c1f","api_key_name":"default","workspace_id":"ws-1","endpoint":"chat.completions","method":"POST","path":"/chat/completions","provider":"openai","model":"gpt-4o-mini","status":200,"stream":true,"duration_ms":0.847,"ttfb_ms":0.835,"virtual_key":"openai-vk","config_id":"pc-1","cache_status":"MISS","usage":{"prompt_tokens":50,"completion_tokens":40,"total_tokens":90,"cached_tokens":3,"reasoning_tokens":7},"cost_usd":0.0000315,"metadata":{"user":"u\"1"},"attempts":[{"target":"config.targets[0]","provider":"openai","status":429,"duration_ms":1.234,"outcome":"retry"},{"target":"config.targets[1]","provider":"azure-openai","status":200,"duration_ms":0.771,"outcome":"ok"}],"error":"upstream <failed>","prompt_id":"p-1","prompt_version":3,"hook_results":{"a":1}}}`},
	{"minimal", func() *Entry { return &Entry{Start: entryStart} },
		`{"llm":{"trace_id":"","api_key_name":"","workspace_id":"","endpoint":"","method":"","path":"","provider":"","model":"","status":0,"stream":false,"duration_ms":0.847}}`},
	{"cost unknown", func() *Entry {
		e := fullEntry()
		e.CostKnown, e.Usage = false, &providers.Usage{PromptTokens: 1, TotalTokens: 1}
		e.Metadata, e.Attempts, e.Error, e.Extra, e.FirstByte = nil, nil, "", nil, time.Time{}
		return e
	},
		`{"llm":{"trace_id":"trace-8c1f","api_key_name":"default","workspace_id":"ws-1","endpoint":"chat.completions","method":"POST","path":"/chat/completions","provider":"openai","model":"gpt-4o-mini","status":200,"stream":true,"duration_ms":0.847,"virtual_key":"openai-vk","config_id":"pc-1","cache_status":"MISS","usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1},"cost_unknown":true}}`},
}

// jsonConfig is a plain json encoder's config without the entry's own
// keys, so a line is its fields alone.
var jsonConfig = zapcore.EncoderConfig{}

// encodeField logs f as the only field of an otherwise empty json entry.
func encodeField(t testing.TB, f zapcore.Field) string {
	t.Helper()
	buf, err := zapcore.NewJSONEncoder(jsonConfig).EncodeEntry(zapcore.Entry{}, []zapcore.Field{f})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	return string(buf.Bytes()[:buf.Len()-1]) // without the newline
}

// TestEntryLogObject pins the access log's llm object.
func TestEntryLogObject(t *testing.T) {
	for _, tt := range entryCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := encodeField(t, tt.entry().accessField(entryNow)); got != tt.object {
				t.Errorf("llm object\n got: %s\nwant: %s", got, tt.object)
			}
		})
	}
}

// TestEntryWriteFields: the gateway's own entry carries the same fields,
// in the same order, at the top level.
func TestEntryWriteFields(t *testing.T) {
	for _, tt := range entryCases {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			tt.entry().write(zap.New(core), entryNow)
			all := logs.AllUntimed()
			if len(all) != 1 || all[0].Message != "llm request" {
				t.Fatalf("entries: %+v", all)
			}
			got := encodeField(t, zap.Object("llm", fieldList(all[0].Context)))
			if got != tt.object {
				t.Errorf("fields\n got: %s\nwant: %s", got, tt.object)
			}
		})
	}
}

// TestEntryWriteLevel: a 5xx entry is a warning, anything else info.
func TestEntryWriteLevel(t *testing.T) {
	for status, want := range map[int]zapcore.Level{200: zapcore.InfoLevel, 429: zapcore.InfoLevel, 502: zapcore.WarnLevel} {
		core, logs := observer.New(zapcore.DebugLevel)
		(&Entry{Status: status, Start: entryStart}).write(zap.New(core), entryNow)
		if all := logs.AllUntimed(); len(all) != 1 || all[0].Level != want {
			t.Errorf("status %d: %+v, want level %v", status, all, want)
		}
	}
}

// fieldList logs fields as one object.
type fieldList []zapcore.Field

func (l fieldList) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, f := range l {
		f.AddTo(enc)
	}
	return nil
}
