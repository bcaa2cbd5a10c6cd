// Availability and bounds (issue 34): the console's sign-in is throttled
// and one key cannot fill its session table; a file call while Redis is
// unreachable is a 503 naming the store; a merged batch list keeps the
// provider's order; the quick start's own key works as a plain client's
// API key.

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// boundsDevKey is the quick start's gateway key, declared as
// examples/Caddyfile declares it (an organisation admin, from the
// environment).
const boundsDevKey = "dev-key"

// loadDevKeySite is examples/Caddyfile's shape: the key `default` read
// from the environment (dev-key), an `openai` virtual key (on the fake),
// a `claude` one for Anthropic, and llm_ratelimit in front with a
// per-key policy, so the rate limiter and the gateway must find the same
// key whichever header carries it.
func loadDevKeySite(t *testing.T, openaiURL, anthropicURL, policy string) {
	t.Helper()
	os.Setenv("TEST_DEV_KEY", boundsDevKey)
	llm := fmt.Sprintf(`api_key default {env.TEST_DEV_KEY} {
			type organisation
			scopes *
		}
		virtual_key openai {
			provider openai
			api_key sk-test-provider
			custom_host %s/v1
		}
		virtual_key claude {
			provider anthropic
			api_key %s
			custom_host %s
		}`, openaiURL, anthropicKey, anthropicURL)
	before := fmt.Sprintf(`llm_ratelimit {
		policy %s {
			type requests
			unit rpm
			value 100
			group_by api_key
		}
	}`, policy)
	loadFresh(t, site{LLM: llm, Before: before})
	reloadSafeTransport.CloseIdleConnections()
}

// TestBoundsDevKeyAsClientKey: the quick start's dev-key works as an
// OpenAI client's API key (Authorization: Bearer) and as an Anthropic
// client's (x-api-key), counted by the rate limiter as the same key as
// in x-gateway-api-key; it never reaches a provider. Beside
// x-gateway-api-key the bearer is still the client's own provider key,
// and a provider key sent alone is a 401 that says where the gateway key
// goes, never forwarded.
func TestBoundsDevKeyAsClientKey(t *testing.T) {
	up := newFakeOpenAI(t)
	ant := messagesAnthropic(t)
	loadDevKeySite(t, up.URL, ant.URL, "devkey-"+uuid.NewString())
	ctx := context.Background()
	base := gatewayURL() + "/"
	var remaining []string

	// openai-go with dev-key as its API key, routed by a virtual key.
	var raw *http.Response
	oc := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(boundsDevKey),
		option.WithHeader("x-gateway-virtual-key", "openai"), option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
	answer, err := oc.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"), option.WithResponseInto(&raw))
	if err != nil || len(answer.Choices) == 0 {
		t.Fatalf("openai-go with dev-key as Bearer: %v", err)
	}
	if got := up.last().Header.Get("Authorization"); got != "Bearer sk-test-provider" {
		t.Fatalf("the provider got Authorization %q", got)
	}
	remaining = append(remaining, raw.Header.Get("x-ratelimit-remaining-requests"))

	// anthropic-sdk-go with dev-key in x-api-key (Claude Code's way).
	ac := anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(gatewayURL(), "v1")), aoption.WithAPIKey(boundsDevKey),
		aoption.WithHeader("x-gateway-virtual-key", "claude"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(reloadSafeClient))
	var araw *http.Response
	msg, err := ac.Messages.New(ctx, userText("claude-sonnet-4-5", "Hello"), aoption.WithResponseInto(&araw))
	if err != nil || len(msg.Content) == 0 {
		t.Fatalf("anthropic-sdk-go with dev-key in x-api-key: %v", err)
	}
	if got := ant.last().Header.Get("x-api-key"); got != anthropicKey {
		t.Fatalf("the provider got x-api-key %q", got)
	}
	remaining = append(remaining, araw.Header.Get("x-ratelimit-remaining-requests"))

	// The header form, with the client's own provider key as Bearer on a
	// provider-header route: that bearer is the provider's, as before.
	own := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("sk-test-provider"),
		option.WithHeader("x-gateway-api-key", boundsDevKey), option.WithHeader("x-gateway-provider", "openai"),
		option.WithHeader("x-gateway-custom-host", up.URL+"/v1"), option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
	if _, err := own.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"), option.WithResponseInto(&raw)); err != nil {
		t.Fatalf("provider key beside x-gateway-api-key: %v", err)
	}
	if got := up.last().Header.Get("Authorization"); got != "Bearer sk-test-provider" {
		t.Fatalf("the provider got Authorization %q", got)
	}
	remaining = append(remaining, raw.Header.Get("x-ratelimit-remaining-requests"))
	// One counter, whichever header carried the key.
	if strings.Join(remaining, ",") != "99,98,97" {
		t.Fatalf("x-ratelimit-remaining-requests %v: the rate limiter did not see one key", remaining)
	}

	// A provider key sent alone is taken as the gateway key: a 401 that
	// says so, and nothing reaches the provider.
	calls := up.count()
	alone := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey("sk-my-own-provider-key"),
		option.WithHeader("x-gateway-provider", "openai"), option.WithHeader("x-gateway-custom-host", up.URL+"/v1"),
		option.WithMaxRetries(0), option.WithHTTPClient(reloadSafeClient))
	_, err = alone.Chat.Completions.New(ctx, chatParams("gpt-4o-mini"))
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 401 || oerr.Code != "invalid_api_key" ||
		!strings.Contains(oerr.Message, "Authorization: Bearer is taken as the gateway key") {
		t.Fatalf("provider key alone: %v", err)
	}
	if up.count() != calls {
		t.Fatal("a request without a gateway key reached the provider")
	}
	// A wrong key in x-api-key is Anthropic's 401.
	bad := anthropic.NewClient(aoption.WithBaseURL(strings.TrimSuffix(gatewayURL(), "v1")), aoption.WithAPIKey("not-the-dev-key"),
		aoption.WithHeader("x-gateway-virtual-key", "claude"), aoption.WithMaxRetries(0), aoption.WithHTTPClient(reloadSafeClient))
	_, err = bad.Messages.New(ctx, userText("claude-sonnet-4-5", "Hello"))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 || aerr.Type() != "authentication_error" {
		t.Fatalf("wrong x-api-key: %v", err)
	}
	// The gateway key never reached a provider, nor the log; neither did
	// the provider key sent alone.
	for _, f := range [][]seenRequest{seenOf(&up.mu, &up.seen), seenOf(&ant.mu, &ant.seen)} {
		for _, r := range f {
			for k, vs := range r.Header {
				if strings.Contains(strings.Join(vs, " "), boundsDevKey) {
					t.Fatalf("the provider got the gateway key in %s", k)
				}
			}
		}
	}
	if l := readLog(t); strings.Contains(l, boundsDevKey) || strings.Contains(l, "sk-my-own-provider-key") {
		t.Fatal("a key is in the log")
	}
}

// seenOf copies a fake's requests under its lock.
func seenOf(mu *sync.Mutex, seen *[]seenRequest) []seenRequest {
	mu.Lock()
	defer mu.Unlock()
	return append([]seenRequest(nil), (*seen)...)
}

// TestBoundsManagedBatchWithBearerKey: a managed batch created with
// dev-key as the client's API key runs as its creator, keeps no copy of
// the key (it is resumable) and never sends it to the provider.
func TestBoundsManagedBatchWithBearerKey(t *testing.T) {
	up := newFakeOpenAI(t)
	ant := messagesAnthropic(t)
	loadDevKeySite(t, up.URL, ant.URL, "devkey-"+uuid.NewString())
	base := gatewayURL()
	// Anthropic has no files API: the file and the batch are the
	// gateway's, and the lines are translated to Messages.
	key := []string{"x-gateway-api-key", "", "Authorization", "Bearer " + boundsDevKey, "x-gateway-virtual-key", "claude"}
	file := uploadBatchFile(t, base, openaiBatchLines(3, 0), key...)
	status, b := createBatch(t, base, file, key...)
	if status != 200 {
		t.Fatalf("create: %d %s", status, b.Raw)
	}
	done := waitBatchDone(t, base, b.Get("id").Str, key...)
	if done.Get("status").Str != "completed" || done.Get("request_counts.completed").Int() != 3 {
		t.Fatalf("batch %s", done.Raw)
	}
	if b.Get("id").Str == "" {
		t.Fatal("no batch id")
	}
	lines := seenOf(&ant.mu, &ant.seen)
	if len(lines) != 3 {
		t.Fatalf("the provider saw %d lines", len(lines))
	}
	for _, r := range lines {
		if got := r.Header.Get("x-api-key"); got != anthropicKey || r.Header.Get("Authorization") != "" {
			t.Fatalf("a line sent x-api-key %q, Authorization %q", got, r.Header.Get("Authorization"))
		}
	}
}

// loadThrottleConsole is consoleSite behind a trusted proxy (127.0.0.1),
// so each test's sign-ins come from addresses of their own
// (X-Forwarded-For) and the process-wide throttle of 127.0.0.1, which
// other console tests use, is left alone.
func loadThrottleConsole(t *testing.T, upstream string) {
	t.Helper()
	os.Setenv("TEST_KEYS_ADMIN", keysAdminKey)
	os.Setenv("TEST_KEYS_ENC", keysEncryptionKey)
	s := &keysSite{Storage: t.TempDir()}
	s.LLM = fmt.Sprintf("ledger %q\n\t\tvirtual_key fake {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}",
		filepath.Join(t.TempDir(), "ledger.db"), upstream)
	newHTTPPort()
	cf := strings.Replace(s.caddyfile(), "\thandle /v1/* {", "\thandle_path /console/* {\n\t\tllm_console\n\t}\n\thandle /v1/* {", 1)
	cf = strings.Replace(cf, "persist_config off", "persist_config off\n\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", 1)
	loadCaddyfile(t, cf)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
}

// signInAs posts the sign-in form with key from the client address
// addr (X-Forwarded-For) and returns the answer, body read.
func signInAs(t *testing.T, key, addr string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", consoleURL()+"/signin", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", addr)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestBoundsConsoleSignInThrottle: through a real Caddy, one key signing
// in over and over is refused past its burst with a 429 on the sign-in
// page and Retry-After, while another key still signs in and the first
// key's sessions keep working; one address guessing keys is refused past
// its own burst, other addresses are not.
func TestBoundsConsoleSignInThrottle(t *testing.T) {
	up := newFakeOpenAI(t)
	loadThrottleConsole(t, up.URL)
	// Fresh keys: the throttle outlives configs, and other tests sign in
	// with the admin key.
	var low, other createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"low-`+uuid.NewString()[:8]+`","scopes":["api_keys.list"]}`, 200, &low)
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"other-`+uuid.NewString()[:8]+`","scopes":["api_keys.list"]}`, 200, &other)
	run := uuid.NewString()[:8]
	addr := func(n int) string { return "198.51.100." + strconv.Itoa(n) }

	var first string
	for i := 0; i < 10; i++ {
		resp, body := signInAs(t, low.Key, addr(1+i))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in %d: %d %s", i, resp.StatusCode, body)
		}
		if i == 0 {
			first = resp.Cookies()[0].Value
		}
	}
	resp, body := signInAs(t, low.Key, addr(50))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" ||
		!strings.Contains(body, `id="signin"`) || !strings.Contains(body, "too many sign-in attempts") ||
		len(resp.Cookies()) != 0 || strings.Contains(body, low.Key) {
		t.Fatalf("11th sign-in of one key: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := signInAs(t, other.Key, addr(50)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another key from the same address: %d %s", resp.StatusCode, body)
	}
	// The throttled key's sessions still work.
	req, _ := http.NewRequest("GET", consoleURL()+"/keys", nil)
	req.AddCookie(&http.Cookie{Name: "llm_console_session", Value: first})
	if resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first session after the refusal: %v %v", resp, err)
	}

	// One address guessing: 30 wrong keys answer 401, the 31st 429.
	n, _ := strconv.ParseUint(run, 16, 32)
	guesser := "2001:db8:" + strconv.FormatUint(n%0xffff, 16) + "::1"
	for i := 0; i < 30; i++ {
		if resp, _ := signInAs(t, "guess-"+run+"-"+strconv.Itoa(i), guesser); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	resp, _ = signInAs(t, other.Key, guesser)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("31st attempt of one address: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := signInAs(t, other.Key, "192.0.2.77"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another address: %d", resp.StatusCode)
	}
	if strings.Contains(readLog(t), low.Key) {
		t.Fatal("a key is in the log")
	}
}

// boundsRedisDB is the Redis database of the file store outage test.
const boundsRedisDB = 12

// TestBoundsFileUploadStoreDown: with the gateway's Redis cut, a file
// upload (and every other file call) answers 503 file_store_unavailable
// in OpenAI's envelope, not a 400 that blames the upload; with Redis back
// the same upload works.
func TestBoundsFileUploadStoreDown(t *testing.T) {
	redistest.Require(t)
	rdb := redistest.Client(t, boundsRedisDB)
	proxy := newCutProxy(t, redistest.Addr())
	loadFresh(t, site{LLM: fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}", proxy.addr(), boundsRedisDB)})
	t.Cleanup(func() {
		ctx := context.Background()
		if keys, _ := rdb.Keys(ctx, "llm_gateway/*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	base := gatewayURL()
	id := uploadBatchFile(t, base, openaiBatchLines(1, 0))
	proxy.cut()
	client := newClient()
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"upload", func() error {
			_, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("{}\n"), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
			return err
		}},
		{"list", func() error { _, err := client.Files.List(ctx, openai.FileListParams{}); return err }},
		{"retrieve", func() error { _, err := client.Files.Get(ctx, id); return err }},
		{"content", func() error { _, err := client.Files.Content(ctx, id); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var oerr *openai.Error
			if !errors.As(err, &oerr) || oerr.StatusCode != 503 || oerr.Code != "file_store_unavailable" || !strings.Contains(oerr.Message, "file store") {
				t.Fatalf("%v", err)
			}
			if strings.Contains(oerr.Message, proxy.addr()) || strings.Contains(oerr.Message, "refused") {
				t.Fatalf("the store's error reached the client: %s", oerr.Message)
			}
		})
	}
	proxy.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := bcall(t, "GET", base, "/files/"+id, nil, "")
		if status == 200 && gjson.GetBytes(body, "id").Str == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back, the file is not: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	uploadBatchFile(t, base, openaiBatchLines(1, 0))
}

// TestBoundsBatchListKeepsProviderOrder: GET /v1/batches merged with a
// provider's list keeps the provider's order among its batches created in
// the same second, which ids sorted would not.
func TestBoundsBatchListKeepsProviderOrder(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/batches" {
			return false
		}
		item := func(id string) string {
			return `{"id":"` + id + `","object":"batch","endpoint":"/v1/chat/completions","input_file_id":"file-abc","completion_window":"24h","status":"completed","created_at":1000001,"request_counts":{"total":1,"completed":1,"failed":0}}`
		}
		writeJSON(w, 200, []byte(`{"object":"list","data":[`+item("batch_prov_a")+`,`+item("batch_prov_c")+`,`+item("batch_prov_b")+
			`],"first_id":"batch_prov_a","last_id":"batch_prov_b","has_more":false}`))
		return true
	}
	loadProviderSite(t)
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1")
	// Every page: managed batches of earlier tests of this process come
	// first (they are newer).
	var ids []string
	iter := client.Batches.ListAutoPaging(context.Background(), openai.BatchListParams{Limit: openai.Int(100)})
	for iter.Next() {
		if b := iter.Current(); strings.HasPrefix(b.ID, "batch_prov_") {
			ids = append(ids, b.ID)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "batch_prov_a,batch_prov_c,batch_prov_b" {
		t.Fatalf("provider batches in the order %v", ids)
	}
}
