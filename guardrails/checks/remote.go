package checks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// defaultTimeout is the reference's default for webhook and log calls and
// validUrls' per-URL probe.
const defaultTimeout = 3 * time.Second

// maxURLs bounds how many distinct URLs validUrls probes in one answer,
// so a model cannot make the gateway fan out without limit.
const maxURLs = 20

// remoteParams reads the URL, headers and timeout shared by webhook and log.
func remoteParams(params json.RawMessage, urlKey string) (string, http.Header, time.Duration, error) {
	u := gjson.GetBytes(params, urlKey)
	if u.Type != gjson.String || u.Str == "" {
		return "", nil, 0, fmt.Errorf("missing %s", urlKey)
	}
	parsed, err := url.Parse(u.Str)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return "", nil, 0, fmt.Errorf("parameter %q: invalid URL (want an http or https URL)", urlKey)
	}
	h := http.Header{}
	hp := gjson.GetBytes(params, "headers")
	if hp.Type == gjson.String && hp.Str != "" {
		hp = gjson.Parse(hp.Str)
		if !hp.IsObject() {
			return "", nil, 0, errors.New(`parameter "headers" must be an object or a JSON string of one`)
		}
	}
	if hp.Exists() && hp.Type != gjson.Null && hp.Type != gjson.String {
		if !hp.IsObject() {
			return "", nil, 0, errors.New(`parameter "headers" must be an object or a JSON string of one`)
		}
		hp.ForEach(func(k, v gjson.Result) bool {
			h.Set(k.Str, v.String())
			return true
		})
	}
	timeout := defaultTimeout
	if t, ok := number(params, "timeout"); ok && t > 0 {
		timeout = time.Duration(t * float64(time.Millisecond))
	}
	if timeout > guardrails.EgressTimeout {
		timeout = guardrails.EgressTimeout
	}
	return u.Str, h, timeout, nil
}

// post sends body and returns the status and (capped) answer body.
func post(ctx context.Context, env *guardrails.Env, target string, h http.Header, body []byte, timeout time.Duration) (int, []byte, error) {
	if env == nil || env.Client == nil {
		return 0, nil, errors.New("outbound calls are not available (no egress client)")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("request timed out after %v: %w", timeout, context.DeadlineExceeded)
		}
		// net/http quotes the URL; a configured one may carry its
		// credentials in userinfo, query or path: only its origin is kept.
		return 0, nil, errors.New(guardrails.HideURLs(err.Error()))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, guardrails.MaxEgressBody))
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("request timed out after %v: %w", timeout, context.DeadlineExceeded)
		}
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, b, nil
}

// httpError describes a non-2xx answer, quoting its body when it is JSON.
func httpError(status int, body []byte) error {
	if len(body) > 0 && jsonlimit.Check(body) == nil {
		return fmt.Errorf("HTTP error %d: %s", status, body)
	}
	return fmt.Errorf("HTTP error %d", status)
}

// Webhook (llm.checks.webhook) posts the request context (the request and
// answer JSON and text, provider, requestType, metadata and eventType;
// never request headers) to "webhookURL" with "headers" (an object or a
// JSON string of one) and waits "timeout" ms (default 3000). The answer's
// "verdict" is the check's verdict; "transformedData.request.json"
// replaces the request body before the request, and
// "transformedData.response.json" the answer after it. A non-2xx answer,
// a timeout or a non-JSON answer is an error.
type Webhook struct{}

// CaddyModule implements caddy.Module.
func (Webhook) CaddyModule() caddy.ModuleInfo {
	return info("webhook", func() caddy.Module { return new(Webhook) })
}

// Remote implements guardrails.Remote.
func (Webhook) Remote() bool { return true }

// Check implements guardrails.Check.
func (Webhook) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	target, h, timeout, err := remoteParams(params, "webhookURL")
	if err != nil {
		return guardrails.Verdict{}, err
	}
	status, body, err := post(ctx, in.Env, target, h, in.Payload(), timeout)
	if err != nil {
		return guardrails.Verdict{}, err
	}
	if status < 200 || status > 299 {
		return guardrails.Verdict{}, httpError(status, body)
	}
	if jsonlimit.Check(body) != nil || !gjson.ParseBytes(body).IsObject() {
		return guardrails.Verdict{}, errors.New("webhook answer is not a JSON object")
	}
	res := gjson.ParseBytes(body)
	v := guardrails.Verdict{Pass: res.Get("verdict").Type == gjson.True}
	data := map[string]any{"verdict": v.Pass}
	if d := res.Get("data"); d.Exists() {
		data["responseData"] = json.RawMessage(d.Raw)
	}
	v.Data = data
	key := "transformedData.request.json"
	if in.Stage == guardrails.AfterRequest {
		key = "transformedData.response.json"
	}
	if t := res.Get(key); t.IsObject() {
		v.Transformed, v.Body = true, []byte(t.Raw)
	}
	return v, nil
}

// Log (llm.checks.log) posts the request context, as webhook does, to
// "logURL" with "headers" and "timeout" (ms, default 3000). It passes when
// the log endpoint answers 2xx; otherwise it reports an error.
type Log struct{}

// CaddyModule implements caddy.Module.
func (Log) CaddyModule() caddy.ModuleInfo {
	return info("log", func() caddy.Module { return new(Log) })
}

// Remote implements guardrails.Remote.
func (Log) Remote() bool { return true }

// Check implements guardrails.Check.
func (Log) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	target, h, timeout, err := remoteParams(params, "logURL")
	if err != nil {
		return guardrails.Verdict{}, err
	}
	status, body, err := post(ctx, in.Env, target, h, in.Payload(), timeout)
	if err != nil {
		return guardrails.Verdict{}, err
	}
	if status < 200 || status > 299 {
		return guardrails.Verdict{}, httpError(status, body)
	}
	return guardrails.Verdict{Pass: true, Data: map[string]any{"message": "logged successfully"}}, nil
}

// urlPattern is the reference's URL extraction.
var urlPattern = regexp.MustCompile(`https?://[^\s,"'{}\[\]]+`)

// ValidURLs (llm.checks.validUrls) passes when every URL in the text is
// reachable: with "onlyDNS" its host resolves, otherwise a HEAD request
// (User-Agent URLValidator/1.0, 3 s) answers 2xx. Text without URLs fails
// whatever "not" says; "not" otherwise inverts. Probes go through the
// gateway's egress client, so internal addresses the operator has not
// allowed count as invalid. At most 20 distinct URLs are probed; more is
// an error.
type ValidURLs struct{}

// CaddyModule implements caddy.Module.
func (ValidURLs) CaddyModule() caddy.ModuleInfo {
	return info("validUrls", func() caddy.Module { return new(ValidURLs) })
}

// Remote implements guardrails.Remote.
func (ValidURLs) Remote() bool { return true }

// Check implements guardrails.Check.
func (ValidURLs) Check(ctx context.Context, in *guardrails.Input, params json.RawMessage) (guardrails.Verdict, error) {
	text := in.Text()
	if text == "" {
		return guardrails.Verdict{}, errors.New("missing text to analyze")
	}
	onlyDNS := truthy(params, "onlyDNS")
	not := truthy(params, "not")
	var urls []string
	seen := map[string]bool{}
	for _, u := range urlPattern.FindAllString(text, -1) {
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return guardrails.Verdict{Pass: false, Data: map[string]any{
			"explanation": "No URLs found in the text.", "validUrls": []string{}, "invalidUrls": []string{},
		}}, nil
	}
	if len(urls) > maxURLs {
		return guardrails.Verdict{}, fmt.Errorf("the text has %d distinct URLs; validUrls checks at most %d", len(urls), maxURLs)
	}
	valid := make([]bool, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if onlyDNS {
				valid[i] = resolves(ctx, in.Env, u)
			} else {
				valid[i] = headOK(ctx, in.Env, u)
			}
		}()
	}
	wg.Wait()
	var good, bad []string
	for i, u := range urls {
		if valid[i] {
			good = append(good, u)
		} else {
			bad = append(bad, u)
		}
	}
	verdict := invert(len(bad) == 0, not)
	return guardrails.Verdict{Pass: verdict, Data: map[string]any{
		"validUrls": nonNil(good), "invalidUrls": nonNil(bad), "onlyDNS": onlyDNS, "not": not, "verdict": verdict,
	}}, nil
}

func headOK(ctx context.Context, env *guardrails.Env, u string) bool {
	if env == nil || env.Client == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, defaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "URLValidator/1.0")
	resp, err := env.Client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode <= 299
}

func resolves(ctx context.Context, env *guardrails.Env, u string) bool {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Hostname() == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, defaultTimeout)
	defer cancel()
	lookup := net.DefaultResolver.LookupHost
	if env != nil && env.LookupHost != nil {
		lookup = env.LookupHost
	}
	addrs, err := lookup(ctx, parsed.Hostname())
	return err == nil && len(addrs) > 0
}
