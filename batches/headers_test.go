package batches

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

func TestSplitHeader(t *testing.T) {
	gw := "gw-" + strings.Repeat("a", 43)
	tests := []struct {
		name            string
		h               http.Header
		persist, memory []string // header names expected in each (canonical)
	}{
		{"sdk headers dropped", http.Header{"User-Agent": {"OpenAI/Go 3.0"}, "Accept": {"application/json"},
			"X-Stainless-Lang": {"go"}, "X-Stainless-Retry-Count": {"0"}, "Openai-Organization": {"org"},
			"Cookie": {"c=1"}, "X-Gateway-Api-Key": {"k"}, "X-Gateway-Virtual-Key": {"vk"}},
			[]string{"X-Gateway-Virtual-Key"}, nil},
		{"sdk authorization beside a virtual key", http.Header{"Authorization": {"Bearer unused"}, "X-Gateway-Virtual-Key": {"vk"}},
			[]string{"X-Gateway-Virtual-Key"}, nil},
		{"gateway key as bearer", http.Header{"Authorization": {"Bearer " + gw}, "X-Gateway-Provider": {"openai"}},
			[]string{"X-Gateway-Provider"}, nil},
		{"bearer equal to the gateway key header", http.Header{"Authorization": {"Bearer k1"}, "X-Gateway-Api-Key": {"k1"},
			"X-Gateway-Config": {"saved"}}, []string{"X-Gateway-Config"}, nil},
		{"provider key", http.Header{"Authorization": {"Bearer sk-1"}, "X-Gateway-Api-Key": {"k"}, "X-Gateway-Provider": {"openai"}},
			[]string{"X-Gateway-Provider"}, []string{"Authorization"}},
		{"provider key beside a config", http.Header{"Authorization": {"Bearer sk-1"}, "X-Gateway-Api-Key": {"k"}, "X-Gateway-Virtual-Key": {"vk"},
			"X-Gateway-Config": {"saved"}}, []string{"X-Gateway-Config", "X-Gateway-Virtual-Key"}, []string{"Authorization"}},
		{"inline config", http.Header{"X-Portkey-Config": {`{"provider":"openai","api_key":"sk"}`}}, nil, []string{"X-Portkey-Config"}},
		{"cloud credentials", http.Header{"X-Gateway-Clouda-Secret-Access-Key": {"s"}, "X-Gateway-Clouda-Region": {"us-east-1"},
			"X-Gateway-Provider": {"bedrock"}}, []string{"X-Gateway-Clouda-Region", "X-Gateway-Provider"}, []string{"X-Gateway-Clouda-Secret-Access-Key"}},
		{"forwarded header values", http.Header{"X-Gateway-Forward-Headers": {"X-Team, x-tenant"}, "X-Team": {"t"}, "X-Tenant": {"u"},
			"X-Other": {"o"}}, []string{"X-Gateway-Forward-Headers"}, []string{"X-Team", "X-Tenant"}},
		{"anthropic shape headers kept", http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"b"}, "X-Api-Key": {"k"}},
			[]string{"Anthropic-Beta", "Anthropic-Version"}, []string{"X-Api-Key"}},
		{"custom host with userinfo", http.Header{"X-Gateway-Custom-Host": {"https://u:p@h"}}, nil, []string{"X-Gateway-Custom-Host"}},
	}
	names := func(h http.Header) []string {
		out := []string{}
		for k := range h {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			persist, memory := SplitHeader(tc.h)
			if got := names(persist); !slices.Equal(got, append([]string{}, tc.persist...)) {
				t.Errorf("persisted %v, want %v", got, tc.persist)
			}
			if got := names(memory); !slices.Equal(got, append([]string{}, tc.memory...)) {
				t.Errorf("held in memory %v, want %v", got, tc.memory)
			}
			want := "true"
			if len(tc.memory) > 0 {
				want = "false; credentials held in memory only: " + strings.ToLower(strings.Join(tc.memory, ", "))
			}
			if got := resumableValue(tc.h); got != want {
				t.Errorf("%s: %q, want %q", ResumableHeader, got, want)
			}
		})
	}
}

// TestSDKBatchResumes creates a batch with openai-go as a user would (its
// User-Agent, Accept, X-Stainless-* and Authorization headers beside the
// gateway's key and virtual key): the creation answer says it is
// resumable, and after the engine stops mid-run a new engine finishes it
// with the routing headers and none of the SDK's.
func TestSDKBatchResumes(t *testing.T) {
	e := newEnv(t, Config{Concurrency: 1, CheckpointEvery: 1})
	third := make(chan struct{})
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if gjson.GetBytes(body, "n").Int() == 3 {
			close(third)
			<-ctx.Done() // the process "dies" while line 3 runs
			return ctx.Err()
		}
		return nil
	}
	var resumable string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.files.ServeFiles(w, r, e.caller.WorkspaceID) || e.engine.ServeBatches(w, r, e.caller, nil) {
			resumable = w.Header().Get(ResumableHeader)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader("x-gateway-api-key", "caddyfile-key"), option.WithHeader("x-gateway-virtual-key", "openai-vk"))
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader(chatLines(5)), "input.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID,
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	if resumable != "true" {
		t.Fatalf("%s: %q, want true", ResumableHeader, resumable)
	}
	<-third
	e.engine.Stop()
	raw, _ := e.kv.Load(ctx, e.engine.key(e.caller.WorkspaceID, b.ID))
	if strings.Contains(strings.ToLower(string(raw)), "stainless") || strings.Contains(string(raw), "caddyfile-key") ||
		!gjson.GetBytes(raw, "resumable").Bool() {
		t.Fatalf("stored record: %s", raw)
	}

	e.runner = &fakeRunner{}
	eng2 := e.newEngine(Config{})
	defer eng2.Stop()
	got := e.wait(t, eng2, b.ID, StatusCompleted)
	if got.RequestCounts != (RequestCounts{5, 5, 0}) {
		t.Fatalf("resumed counts %+v", got.RequestCounts)
	}
	if e.runner.header.Get("X-Gateway-Virtual-Key") != "openai-vk" || e.runner.header.Get("User-Agent") != "" ||
		e.runner.header.Get("Authorization") != "" || e.runner.header.Get("X-Stainless-Lang") != "" {
		t.Fatalf("resumed line header %v", e.runner.header)
	}
	resp, err := client.Files.Content(ctx, *got.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		seen[gjson.Get(l, "custom_id").Str]++
	}
	if len(seen) != 5 {
		t.Fatalf("output custom_ids %v", seen)
	}
}
