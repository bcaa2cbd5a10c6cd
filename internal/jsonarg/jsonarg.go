// Package jsonarg reads a Caddyfile argument that holds either an inline
// JSON object or the path of a file holding one (the llm option's config
// and guardrail lines), so every such option decides the same way.
package jsonarg

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// ErrInvalid is returned for an argument that is an inline JSON object but
// does not parse.
var ErrInvalid = errors.New("inline value is not valid JSON")

// Value returns the JSON for an "inline JSON object | file path" argument:
// the object itself when v is one (it must be valid JSON), otherwise v as a
// JSON string, the path the app reads when the config loads.
//
// v is an object when it starts with "{" followed, after optional spaces,
// by a quote, a "}" or nothing: the ways a JSON object can begin. A Caddy
// placeholder such as {env.DIR}/g.json is therefore a path.
func Value(v string) (json.RawMessage, error) {
	if !isObject(v) {
		return caddyconfig.JSON(v, nil), nil
	}
	if !json.Valid([]byte(v)) {
		return nil, ErrInvalid
	}
	return json.RawMessage(v), nil
}

// isObject reports whether v is meant as an inline JSON object rather than
// a path (see Value).
func isObject(v string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), "{")
	if !ok {
		return false
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	return rest == "" || rest[0] == '"' || rest[0] == '}'
}
