// Batch memory and limits, revoked keys and list order (issue 21).

package integration

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestBatchesHardeningManyBatchesOneFile creates 30 batches over one
// 8 MB input file (with max_active 30) while the provider holds every
// call: the heap grows by far less than 30 copies of the file (it grew
// by 476 MB when each batch kept its parsed input), and the 31st create
// is a 429 in OpenAI's envelope.
func TestBatchesHardeningManyBatchesOneFile(t *testing.T) {
	gate := make(chan struct{})
	var closeGate sync.Once
	release := func() { closeGate.Do(func() { close(gate) }) }
	t.Cleanup(release)
	up := newCountingProvider(t)
	up.hold = func(int32) { <-gate }
	loadFresh(t, site{LLM: "batches {\n\t\t\tmax_active 30\n\t\t}"})
	base := gatewayURL()
	input := openaiBatchLines(100, 80_000) // 8 MB
	file := uploadBatchFile(t, base, input)
	input = nil
	before := heapInuse()
	headers := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-x"}
	var ids []string
	for i := 0; ; i++ {
		status, b := createBatch(t, base, file, headers...)
		if status == http.StatusTooManyRequests {
			if b.Get("error.code").Str != "too_many_batches" || b.Get("error.type").Str == "" || b.Get("error.message").Str == "" {
				t.Fatalf("429 body %s", b.Raw)
			}
			break
		}
		if status != 200 || i >= 30 {
			t.Fatalf("create %d: %d %s", i+1, status, b.Raw)
		}
		ids = append(ids, b.Get("id").Str)
	}
	// Other tests' batches may still count against the limit; most of
	// the 30 are this test's.
	if len(ids) < 25 {
		t.Fatalf("only %d batches before the 429", len(ids))
	}
	// Let the running batches validate their input and dispatch lines.
	for up.calls.Load() < 32 {
		runtime.Gosched()
	}
	growth := int64(heapInuse()) - int64(before)
	t.Logf("%d batches over one %d-byte file: heap in use grew by %d MB, %d provider calls held", len(ids), len(openaiBatchLines(1, 80_000))*100, growth>>20, up.calls.Load())
	if growth > 200<<20 {
		t.Fatalf("heap in use grew by %d MB for %d batches over one 8 MB file", growth>>20, len(ids))
	}
	for _, id := range ids {
		bcall(t, "POST", base, "/batches/"+id+"/cancel", nil, "")
	}
	release()
	for _, id := range ids {
		if b := waitBatchDone(t, base, id); b.Get("status").Str != "cancelled" {
			t.Fatalf("batch %s", b.Raw)
		}
	}
}

// revocationSite has the test key and key "other", both in one
// workspace, so the test key can watch other's batch after other is
// removed.
func revocationSite(withOther bool) string {
	other := ""
	if withOther {
		other = `api_key other sk-other-key-0123456789 {
			workspace_id 2f7c4c1e-9b7e-4d1a-8f0e-4b5a7c9d1e01
			organisation_id 2f7c4c1e-9b7e-4d1a-8f0e-4b5a7c9d1e02
		}`
	}
	return fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	llm {
		api_key test {env.TEST_GATEWAY_KEY} {
			workspace_id 2f7c4c1e-9b7e-4d1a-8f0e-4b5a7c9d1e01
			organisation_id 2f7c4c1e-9b7e-4d1a-8f0e-4b5a7c9d1e02
		}
		%s
	}
}

:%d {
	handle /v1/* {
		llm_gateway {
			custom_host_allow loopback
		}
	}
}
`, adminPort, other, httpPort)
}

// TestBatchesHardeningRevokedKeyStopsBatch removes the key that created
// a 200-line batch by a reload while its first lines are held at the
// provider: no further line runs (it kept spending ~240 calls before),
// and the batch fails with api_key_revoked.
func TestBatchesHardeningRevokedKeyStopsBatch(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{})
	var once, closeGate sync.Once
	t.Cleanup(func() { closeGate.Do(func() { close(gate) }) })
	up := newCountingProvider(t)
	up.hold = func(n int32) {
		if n >= 5 {
			once.Do(func() { close(started) })
			<-gate
		}
	}
	newHTTPPort()
	loadCaddyfile(t, revocationSite(true))
	base := gatewayURL()
	file := uploadBatchFile(t, base, openaiBatchLines(200, 0))
	id := mustCreateBatch(t, base, file, "x-gateway-api-key", "sk-other-key-0123456789",
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1", "Authorization", "Bearer sk-x")
	<-started
	newHTTPPort()
	loadCaddyfile(t, revocationSite(false))
	base = gatewayURL()
	if status, _ := bcall(t, "GET", base, "/batches/"+id, nil, "", "x-gateway-api-key", "sk-other-key-0123456789"); status != 401 {
		t.Fatalf("removed key: %d", status)
	}
	atReload := up.calls.Load()
	closeGate.Do(func() { close(gate) })
	b := waitBatchDone(t, base, id)
	out, errs := checkCountsMatchFiles(t, base, b)
	if b.Get("status").Str != "failed" || b.Get("errors.data.0.code").Str != "api_key_revoked" {
		t.Fatalf("batch %s", b.Raw)
	}
	// Lines already at the provider finish; none starts after the reload.
	if after := up.calls.Load(); after > atReload+8 || len(out)+len(errs) != 200 {
		t.Fatalf("%d calls at the reload, %d in all; %d output and %d error lines", atReload, after, len(out), len(errs))
	}
	if errs[len(errs)-1].Get("error.code").Str != "api_key_revoked" {
		t.Fatalf("last error line %s", errs[len(errs)-1].Raw)
	}
}

// TestBatchesHardeningListOrder creates six batches in quick succession
// (most within one second) and lists them merged with a provider's list:
// newest first, in creation order, not re-sorted by their random ids.
func TestBatchesHardeningListOrder(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = providerJobsHook
	loadFresh(t, site{})
	base := gatewayURL()
	// Lines for a provider the gateway has no key for: they fail fast;
	// only the order matters here.
	file := uploadBatchFile(t, base, openaiBatchLines(1, 0))
	var ids []string
	seconds := map[int64]int{}
	for range 6 {
		status, b := createBatch(t, base, file)
		if status != 200 {
			t.Fatalf("create: %d %s", status, b.Raw)
		}
		ids = append(ids, b.Get("id").Str)
		seconds[b.Get("created_at").Int()]++
	}
	for _, merged := range []bool{false, true} {
		var headers []string
		if merged {
			headers = []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-x"}
		}
		status, body := bcall(t, "GET", base, "/batches?limit=100", nil, "", headers...)
		if status != 200 {
			t.Fatalf("list: %d %s", status, body)
		}
		pos := map[string]int{}
		for i, b := range gjson.GetBytes(body, "data").Array() {
			pos[b.Get("id").Str] = i
		}
		for i := 1; i < len(ids); i++ {
			if pos[ids[i]] >= pos[ids[i-1]] {
				t.Fatalf("merged=%v: %s (created after %s) is not listed before it; created_at seconds %v", merged, ids[i], ids[i-1], seconds)
			}
		}
	}
}
