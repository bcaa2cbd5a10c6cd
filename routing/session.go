package routing

import (
	"bytes"
	"strconv"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Where a request's session key came from, in the order they are tried
// (sessionOf). The source is part of the key, so a header value and an
// equal prompt_cache_key are different sessions.
const (
	SessionHeader      = "header"           // x-gateway-session-id
	SessionMetadata    = "metadata"         // session_id in x-gateway-metadata
	SessionBody        = "body_metadata"    // the body's metadata.session_id
	SessionCacheKey    = "prompt_cache_key" // OpenAI's prompt_cache_key
	SessionConversaton = "conversation"     // the system prompt and first user turn
)

// sessionFields are the top-level body members sessionOf reads, in one
// walk of the body.
var sessionFields = [...]string{"metadata", "prompt_cache_key", "messages", "system", "instructions", "input"}

// FNV-1a, 64 bits: a stable hash, so every replica derives the same pin
// key from the same session (maphash's seeds differ per process). A
// collision only makes two sessions share a pin.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	// A terminator keeps ("ab","c") and ("a","bc") apart.
	h ^= 0xff
	h *= fnvPrime
	return h
}

// str views b as a string without copying; the result must not outlive b.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// sessionOf returns the hash of req's session key and where it came from,
// or source "" when the request names no session and has no conversation
// to derive one from. Tried in order: the x-gateway-session-id header,
// session_id in the metadata header, the body's metadata.session_id,
// prompt_cache_key, and last a hash of the system prompt (system,
// instructions or the first system/developer message) with the first
// user turn, which every later turn of a conversation resends unchanged.
// previous_response_id is not a key: it names the previous turn, so it
// changes every turn. Req.Scope (the caller's workspace) is hashed in
// first: tenants never share a pin.
func sessionOf(req *Request) (uint64, string) {
	if req == nil {
		return 0, ""
	}
	h := fnvString(fnvOffset, req.Scope)
	if req.Session != "" {
		return fnvString(fnvString(h, SessionHeader), req.Session), SessionHeader
	}
	if v := req.Metadata["session_id"]; v != "" {
		return fnvString(fnvString(h, SessionMetadata), v), SessionMetadata
	}
	if len(req.Params) == 0 {
		return 0, ""
	}
	var raw [len(sessionFields)][]byte
	jsonlimit.Members(req.Params, sessionFields[:], raw[:])
	if raw[0] != nil {
		if v := gjson.Get(str(raw[0]), "session_id"); v.Type == gjson.String && v.Str != "" {
			return fnvString(fnvString(h, SessionBody), v.Str), SessionBody
		}
	}
	if raw[1] != nil {
		if v := gjson.Parse(str(raw[1])); v.Type == gjson.String && v.Str != "" {
			return fnvString(fnvString(h, SessionCacheKey), v.Str), SessionCacheKey
		}
	}
	var system, user []byte
	if raw[2] != nil { // chat completions and Anthropic messages
		system, user = firstTurns(raw[2])
	} else if in := raw[5]; in != nil { // Responses
		if in[0] == '"' {
			user = in
		} else {
			system, user = firstTurns(in)
		}
	}
	for _, i := range [2]int{3, 4} { // system, instructions
		if raw[i] != nil {
			system = raw[i]
		}
	}
	if len(user) == 0 {
		return 0, ""
	}
	h = fnvString(h, SessionConversaton)
	return hashTurn(hashTurn(h, system), user), SessionConversaton
}

// maxTurnHashed bounds the bytes of the system prompt and of the first
// user turn that are hashed, so a 100 KB system prompt costs what a 4 KB
// one does. Two conversations alike in the first 4 KB of both share a pin,
// which is harmless (a pin only picks a target) and even what a prompt
// cache wants: their prompts share that prefix.
const maxTurnHashed = 4 << 10

// hashTurn mixes the raw JSON of a turn's content, at most its first
// maxTurnHashed bytes, into h with xxhash (stable across processes, as
// FNV is, and about ten times faster per byte).
func hashTurn(h uint64, raw []byte) uint64 {
	raw = raw[:min(len(raw), maxTurnHashed)]
	h ^= xxhash.Sum64(raw)
	h *= fnvPrime
	// A terminator keeps (a, bc) and (ab, c) apart, as fnvString does.
	h ^= 0xff
	h *= fnvPrime
	return h
}

// turnFields are the members of a message firstTurns reads.
var turnFields = [...]string{"role", "content"}

// firstTurns returns the raw content of the first system (or developer)
// message and of the first user message of a messages array, walking the
// array once, only as far as the first user message, with jsonlimit's
// scanner (no parse, no allocation).
func firstTurns(messages []byte) (system, user []byte) {
	var v [len(turnFields)][]byte
	jsonlimit.Elements(messages, func(m []byte) bool {
		if m[0] != '{' {
			return true
		}
		jsonlimit.Members(m, turnFields[:], v[:])
		switch roleOf(v[0]) {
		case "system", "developer":
			if system == nil {
				system = v[1]
			}
		case "user":
			user = v[1]
			return false
		}
		return true
	})
	return system, user
}

// roleOf returns a message's role from its raw JSON value, "" when it is
// not a string. A role written with escapes (rare) is decoded.
func roleOf(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return str(body)
	}
	s, _ := jsonlimit.String(raw)
	return s
}

// GatewayCacheKey returns the prompt_cache_key the gateway sends on a
// session's behalf: "gw-" and the session's hash in hex (within the
// caller's workspace, as the pin's), so every turn of a session asks
// OpenAI for the same cache routing and no client text or id is sent.
// "" when req names no session, or names it by its own prompt_cache_key.
func GatewayCacheKey(req *Request) string {
	h, src := sessionOf(req)
	if src == "" || src == SessionCacheKey {
		return ""
	}
	return "gw-" + strconv.FormatUint(h, 16)
}

// AffinityLeaves calls visit for each leaf under a loadbalance node with
// affinity, once.
func (p *Plan) AffinityLeaves(visit func(*Target)) {
	var walk func(n *Node, under bool)
	walk = func(n *Node, under bool) {
		if n.Target != nil {
			if under {
				visit(n.Target)
			}
			return
		}
		under = under || n.Strategy != nil && n.Strategy.Mode == ModeLoadBalance && n.Strategy.Affinity != nil
		for _, c := range n.Children {
			walk(c, under)
		}
	}
	if p != nil && p.Root != nil {
		walk(p.Root, false)
	}
}
