package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// TestClusterBatchOwnerKilled runs a 200-line managed batch on a gateway
// binary (A) sharing one Redis with this process's Caddy (B, another
// instance id, as a replacement pod has), kills A with SIGKILL mid-run,
// and sees B take the batch over once A's lease (batches { lease 2s })
// lapses and finish it:
// every custom_id exactly once in the output, and no more lines sent to
// the provider twice than A had in flight (8).
func TestClusterBatchOwnerKilled(t *testing.T) {
	requireRedis(t)
	bin := buildGateway(t)

	var (
		mu      sync.Mutex
		calls   = map[int]int{} // line number -> provider calls
		killed  = make(chan struct{})
		started int
	)
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(gjson.GetBytes(body, "messages.0.content").Str, "line "))
		mu.Lock()
		calls[n]++
		started++
		hold := started > 60
		mu.Unlock()
		if hold {
			select { // A dies while these run; B's are answered at once
			case <-killed:
			case <-r.Context().Done():
				return true
			}
		}
		writeJSON(w, 200, []byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
		return true
	}
	llm := redisBlock(false) + fmt.Sprintf("\n\t\tvirtual_key vk-batch {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}", up.URL) +
		"\n\t\tbatches {\n\t\t\tlease 2s\n\t\t}"

	portA := freePort()
	dir := t.TempDir()
	siteA := rlSite{Redis: llm, Storage: filepath.Join(dir, "storage"), HTTPPort: portA, AdminPort: freePort(),
		Log: filepath.Join(dir, "a.log"), NoLimiter: true}
	a := startGateway(t, bin, dir, siteA.caddyfile(), portA)

	client := func(base string) openai.Client {
		return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
			option.WithHeader("x-gateway-api-key", gatewayKey))
	}
	clientA := client(fmt.Sprintf("http://127.0.0.1:%d/v1", portA))
	var in bytes.Buffer
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&in, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, i)
	}
	ctx := context.Background()
	f, err := clientA.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(in.Bytes()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	// Uploaded without routing headers, the file is the gateway's; the
	// batch's lines go through the virtual key, a header it stores.
	b, err := clientA.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"},
		option.WithHeader("x-gateway-virtual-key", "vk-batch"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := started
		mu.Unlock()
		if n >= 68 { // 60 answered, 8 held in flight
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch on A started %d lines", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	killedAt := time.Now()
	close(killed)

	loadRL(t, rlSite{Redis: llm, NoLimiter: true})
	clientB := client(gatewayURL())
	var got *openai.Batch
	for deadline := time.Now().Add(60 * time.Second); ; {
		got, err = clientB.Batches.Get(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == openai.BatchStatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s after A was killed: %+v", got.Status, got.RequestCounts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killedAt)
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(fileText(t, clientB, got.OutputFileID)), "\n") {
		seen[gjson.Get(l, "custom_id").Str]++
	}
	twice := 0
	mu.Lock()
	for _, c := range calls {
		twice += c - 1
	}
	distinct := len(calls)
	mu.Unlock()
	t.Logf("A killed mid-batch; B finished it %v later (lease 2 s); %d lines sent twice, %d custom_ids in the output",
		took.Round(100*time.Millisecond), twice, len(seen))
	if len(seen) != 200 || got.RequestCounts.Completed != 200 || distinct != 200 {
		t.Fatalf("output has %d custom_ids, counts %+v, provider saw %d lines", len(seen), got.RequestCounts, distinct)
	}
	for cid, n := range seen {
		if n != 1 {
			t.Fatalf("%s is in the output %d times", cid, n)
		}
	}
	if twice > 8 {
		t.Fatalf("%d lines were sent to the provider twice, want at most the 8 in flight", twice)
	}
}
