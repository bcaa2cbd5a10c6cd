package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestClusterStoredResponseStoreDown: with the shared store (Redis)
// unreachable and fail_open, a POST /v1/responses whose answer must be
// stored (store defaults to true) on a translated target is refused with a
// 503 naming the store before the provider is called, instead of being
// billed and then lost; with "store": false it is served.
func TestClusterStoredResponseStoreDown(t *testing.T) {
	up := responsesAnthropic(t)
	dead := fmt.Sprintf("127.0.0.1:%d", freePort()) // nothing listens there
	loadRL(t, rlSite{Redis: "redis " + dead + " {\n\t\t\tfail_open\n\t\t}", NoLimiter: true})
	client := responsesClient("anthropic", up.URL)
	ctx := context.Background()

	tests := []struct {
		name       string
		store      *bool
		wantStatus int
	}{
		{"stored by default", nil, http.StatusServiceUnavailable},
		{"store true", ptrBool(true), http.StatusServiceUnavailable},
		{"store false", ptrBool(false), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := up.seenCount()
			p := textParams("claude-sonnet-4-5", "hello")
			if tc.store != nil {
				p.Store = openai.Bool(*tc.store)
			}
			resp, err := client.Responses.New(ctx, p)
			calls := up.seenCount() - before
			if tc.wantStatus == http.StatusOK {
				if err != nil || resp.OutputText() != "seen 1 messages" || calls != 1 {
					t.Fatalf("store false with the store down: %v %v (provider calls %d)", err, resp, calls)
				}
				return
			}
			var apiErr *openai.Error
			if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != tc.wantStatus || apiErr.Code != "store_unavailable" {
				t.Fatalf("want %d store_unavailable, got %v", tc.wantStatus, err)
			}
			if calls != 0 {
				t.Fatalf("the provider was called %d times for a response that could not be stored", calls)
			}
		})
	}
}

// seenCount is how many requests the fake received.
func (f *fakeServer) seenCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func ptrBool(b bool) *bool { return &b }
