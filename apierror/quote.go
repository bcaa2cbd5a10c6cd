package apierror

import "strconv"

// MaxQuoted is the longest client value an error message may quote.
const MaxQuoted = 64

// QuoteID quotes a client-supplied value for an error message only when
// it looks like a record id or slug (at most MaxQuoted letters, digits,
// '-', '_', '.', ':'); anything else is replaced by a neutral phrase.
// Header values and config text can hold credentials and can be large, so
// messages (which also reach the log) never echo them whole.
func QuoteID(v string) string {
	if IDShaped(v) {
		return strconv.Quote(v)
	}
	return "(value not shown)"
}

// IDShaped reports whether v looks like a record id or slug: 1 to
// MaxQuoted letters, digits, '-', '_', '.' or ':'.
func IDShaped(v string) bool {
	if v == "" || len(v) > MaxQuoted {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// QuotePath quotes a request path for an error message, cut to MaxQuoted
// bytes (at a character boundary) so a long URL is never echoed whole.
func QuotePath(p string) string {
	if len(p) <= MaxQuoted {
		return strconv.Quote(p)
	}
	cut := MaxQuoted
	for cut > 0 && p[cut]&0xC0 == 0x80 {
		cut--
	}
	return strconv.Quote(p[:cut]) + "…"
}
