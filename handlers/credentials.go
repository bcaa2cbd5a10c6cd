package handlers

// Provider credentials travel on the upstream request only. What the
// gateway logs of that request (send.go's DEBUG "upstream roundtrip"
// line) masks every header isCredentialHeader names: x-api-key, api-key,
// x-goog-api-key, x-amz-security-token and the like, not only
// Authorization and Cookie.

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
