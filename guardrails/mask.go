package guardrails

import (
	"net/url"
	"regexp"
	"strings"
)

// Masked replaces the secret parts of a URL.
const Masked = "***"

// urlInText finds http(s) URLs in an error message: net/http quotes the
// URL it failed on (`Post "https://…": …`), with the password already
// replaced but the user name and query kept.
var urlInText = regexp.MustCompile(`(?i)https?://[^\s"'<>]+`)

// MaskURL returns u with its user information and every query value
// replaced by "***" (keys are kept, so the URL stays recognisable). A
// webhook URL may carry its credentials either way. Text that does not
// parse as a URL is cut at its authority, so nothing after the scheme's
// host part survives.
func MaskURL(u string) string { return maskURL(u, false) }

// maskURL masks u; with path it also masks the path, which some webhooks
// (chat-service incoming webhooks) use as their secret.
func maskURL(u string, path bool) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		scheme, _, ok := strings.Cut(u, "://")
		if !ok {
			return Masked
		}
		return scheme + "://" + Masked
	}
	var b strings.Builder
	b.WriteString(p.Scheme + "://")
	if p.User != nil {
		b.WriteString(Masked + "@")
	}
	b.WriteString(p.Host)
	if ep := p.EscapedPath(); path && ep != "" && ep != "/" {
		b.WriteString("/" + Masked)
	} else {
		b.WriteString(ep)
	}
	if p.RawQuery != "" || p.ForceQuery {
		b.WriteByte('?')
		for i, pair := range strings.Split(p.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			// A bare item ("?SECRET") may itself be the token.
			if k, _, ok := strings.Cut(pair, "="); ok {
				b.WriteString(k + "=" + Masked)
			} else {
				b.WriteString(Masked)
			}
		}
	}
	if p.Fragment != "" {
		b.WriteString("#" + Masked)
	}
	return b.String()
}

// MaskURLs masks every http(s) URL in s with MaskURL. Check errors go
// through it before they reach hook_results, the log or a client.
func MaskURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, MaskURL)
}

// HideURLs is MaskURLs that also masks each URL's path: a configured
// webhook or log URL is reported by its origin only.
func HideURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(u string) string { return maskURL(u, true) })
}
