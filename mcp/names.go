package mcp

import (
	"crypto/sha256"
	"encoding/hex"
)

// Exposed names. /mcp serves the tools (and prompts) of several servers
// under one namespace, so each is named <server>__<name>; /mcp/{server}
// serves them under their own names. Clients limit names: OpenAI's and
// Bedrock's function names are ^[A-Za-z0-9_-]{1,64}$, and a longer or
// stranger name is refused by the model API long after tools/list
// accepted it. So an exposed name that would break either rule is cut
// and given a stable suffix (the first 8 hex digits of a SHA-256 of the
// server and the upstream name), the same on every replica and every
// listing: prompt caches keyed on the tool list stay warm.

// MaxNameLen is the longest exposed tool or prompt name.
const MaxNameLen = 64

// Separator joins a server's name and a tool's on /mcp.
const Separator = "__"

// exposedName is the name a client sees for the upstream name of server
// (prefix is the server's name on /mcp, "" on /mcp/{server}).
func exposedName(prefix, server, name string) string {
	full := name
	if prefix != "" {
		full = prefix + Separator + name
	}
	if len(full) <= MaxNameLen && plainName(full) {
		return full
	}
	sum := sha256.Sum256([]byte(server + "\x00" + name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	b := []byte(full)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > MaxNameLen-len(suffix) {
		b = b[:MaxNameLen-len(suffix)]
	}
	return string(b) + suffix
}

// plainName reports whether s is non-empty and made of name bytes only.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
