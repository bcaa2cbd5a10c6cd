package handlers

import (
	"context"
	"net/http"
)

// Provider credentials are kept off the request reverse_proxy sees and
// logs. Caddy's DEBUG "upstream roundtrip" line (and its "aborting with
// incomplete response" line) print the upstream request's headers and
// redact only Authorization and Cookie, so x-api-key, api-key,
// x-goog-api-key or x-amz-security-token would appear in clear. The
// gateway therefore takes every credential header out of the request it
// hands the proxy, carries them in the request context, and a wrapping
// RoundTripper (credTransport) puts them back on a copy of the request
// just before it goes on the wire. The proxy's logs see the request
// without them; the provider receives it with them.

type credKey struct{}

// isCredentialHeader reports whether a canonical header name carries a
// credential: the names providers authenticate with, and any name that
// says key, token, secret, signature or auth.
func isCredentialHeader(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key",
		"X-Amz-Security-Token", "Cookie":
		return true
	case "Content-Type", "Accept", "Openai-Beta", "Anthropic-Version", "Anthropic-Beta",
		"X-Amz-Date", "X-Amz-Content-Sha256", "Traceparent", "Tracestate":
		// The headers providers are usually sent, answered without the
		// word search below (it runs for every header of every request).
		return false
	}
	for _, w := range [...]string{"key", "token", "secret", "signature", "auth", "credential", "password"} {
		if containsLower(name, w) {
			return true
		}
	}
	return false
}

// containsLower reports whether s contains the lower-case ASCII word w in
// any case, without the allocation of strings.ToLower (it runs for every
// header of every upstream request).
func containsLower(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for ; j < len(w); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != w[j] {
				break
			}
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

// withCredentials moves the credential headers of h into ctx, for
// credTransport to restore.
func withCredentials(ctx context.Context, h http.Header) context.Context {
	var creds http.Header
	for k, v := range h {
		if !isCredentialHeader(k) {
			continue
		}
		if creds == nil {
			creds = make(http.Header, 2)
		}
		creds[k] = v
		delete(h, k)
	}
	if creds == nil {
		return ctx
	}
	return context.WithValue(ctx, credKey{}, creds)
}

// credTransport puts back the credentials withCredentials took out, on a
// shallow copy of the request with its own header map, so the request
// reverse_proxy keeps (and logs) never holds them. It also leaves out the
// X-Forwarded-* headers reverse_proxy adds: providers need not learn the
// client's address, and dropping them while the headers are copied anyway
// is cheaper than a header operation on every request.
type credTransport struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t credTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	creds, _ := req.Context().Value(credKey{}).(http.Header)
	if creds == nil && !hasForwarded(req.Header) {
		return t.next.RoundTrip(req)
	}
	r2 := *req
	h := make(http.Header, len(req.Header)+len(creds))
	for k, v := range req.Header {
		if !isForwardedHeader(k) {
			h[k] = v
		}
	}
	for k, v := range creds {
		h[k] = v
	}
	r2.Header = h
	return t.next.RoundTrip(&r2)
}

// isForwardedHeader reports the headers reverse_proxy adds to tell the
// upstream about the client.
func isForwardedHeader(k string) bool {
	switch k {
	case "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

func hasForwarded(h http.Header) bool {
	for k := range h {
		if isForwardedHeader(k) {
			return true
		}
	}
	return false
}
