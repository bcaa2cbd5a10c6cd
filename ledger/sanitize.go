package ledger

import (
	"strings"
	"unicode/utf8"
)

// PostgreSQL's text type refuses a NUL byte and, in a UTF-8 database,
// bytes that are not UTF-8, and its jsonb refuses the \u0000 a NUL
// becomes in JSON: one such value in a batch made the database refuse
// the whole batch, every tenant's records with it. The store therefore
// replaces each NUL byte and each invalid UTF-8 sequence of a record's
// text with U+FFFD before binding, on both databases, so a record reads
// back the same from either.

// cleanText returns s with every NUL byte and every maximal invalid
// UTF-8 sequence replaced by U+FFFD. A clean string is returned as it is,
// without allocating.
func cleanText(s string) string {
	clean := true
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0 {
			clean = false
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if clean && (ascii || utf8.ValidString(s)) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanRecord makes r's text storable (cleanText), in place. A metadata
// map with a dirty key or value is replaced by a cleaned copy (the map
// may be the request's own), which is then bounded again: replacement
// characters are longer than the bytes they replace.
func cleanRecord(r *Record) {
	for _, f := range []*string{&r.TraceID, &r.APIKey, &r.Workspace, &r.Organisation, &r.VirtualKey,
		&r.ConfigID, &r.Provider, &r.Model, &r.Operation, &r.CacheState, &r.BatchID, &r.CustomID, &r.ErrorType} {
		if c := cleanText(*f); c != *f {
			*f = bound(c)
		}
	}
	dirty := false
	for k, v := range r.Metadata {
		if cleanText(k) != k || cleanText(v) != v {
			dirty = true
			break
		}
	}
	if !dirty {
		return
	}
	m := make(map[string]string, len(r.Metadata))
	for k, v := range r.Metadata {
		m[cleanText(k)] = cleanText(v)
	}
	r.Metadata = boundMetadata(m)
}
