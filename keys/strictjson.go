package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Strict reading of the JSON the keys API stores (request bodies, saved
// configs). Whether the JSON is valid, how deep it nests and whether a
// member is given twice (names compared after unescaping) is decided by
// internal/jsonlimit, the one strict reading every body of the gateway
// passes. This walker adds what only the keys API refuses: forbidden
// member names and masked credentials. It walks the token stream of
// encoding/json's Decoder, which unescapes member names, so
// "custom\u005fhost" is seen as custom_host, and it compares names without
// regard to case, as encoding/json matches them to struct fields
// ("Custom_Host" would set CustomHost).

// maxJSONDepth bounds the nesting the walker follows (configs nest a few
// levels; nothing the API stores needs more).
const maxJSONDepth = 64

// JSONError is a refused member: Member is its path from the root
// (targets[1].custom_host), Name its own name.
type JSONError struct {
	Member string
	Name   string
	Msg    string
}

func (e *JSONError) Error() string {
	if e.Member == "" {
		return e.Msg
	}
	return e.Member + ": " + e.Msg
}

// CheckJSON reads raw strictly: one JSON value, no member given twice in
// an object, nesting at most 64 deep, and none of the forbidden member
// names anywhere, compared after unescaping.
func CheckJSON(raw []byte, forbidden ...string) error {
	w := walker{forbidden: forbidden}
	return w.run(raw)
}

// CheckConfigJSON is CheckJSON for a config saved through the API: no
// custom_host anywhere, and no credential (configSecrets) given as the
// Masked "****" an answer shows, so a config read back and sent again is
// refused rather than stored with the mask as its key.
func CheckConfigJSON(raw []byte) error {
	w := walker{forbidden: []string{"custom_host"}, refuseMask: true}
	return w.run(raw)
}

type walker struct {
	forbidden  []string
	refuseMask bool
	dec        *json.Decoder
}

func (w *walker) run(raw []byte) error {
	if err := jsonlimit.Check(raw); err != nil {
		if d, ok := jsonlimit.AsDuplicate(err); ok {
			name := d.Path[strings.LastIndexAny(d.Path, ".]")+1:]
			return &JSONError{Member: d.Path, Name: name, Msg: "is given more than once"}
		}
		return &JSONError{Msg: "is not acceptable JSON: " + err.Error()}
	}
	w.dec = json.NewDecoder(bytes.NewReader(raw))
	w.dec.UseNumber()
	if err := w.value("", 0, false); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return &JSONError{Msg: "the JSON holds more than one value"}
	}
	return nil
}

// value reads one value; secret is set inside a credential member.
func (w *walker) value(at string, depth int, secret bool) error {
	if depth > maxJSONDepth {
		return &JSONError{Member: at, Msg: fmt.Sprintf("nested more than %d levels deep", maxJSONDepth)}
	}
	tok, err := w.dec.Token()
	if err != nil {
		return invalid(at, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return w.object(at, depth, secret)
		}
		if t != '[' {
			return &JSONError{Member: at, Msg: "is not valid JSON"}
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(fmt.Sprintf("%s[%d]", at, i), depth+1, secret); err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil {
			return invalid(at, err)
		}
	case string:
		if secret && w.refuseMask && t == Masked {
			return &JSONError{Member: at, Name: Masked, Msg: `is the masked "****" an answer shows: send the credential itself`}
		}
	}
	return nil
}

func (w *walker) object(at string, depth int, secret bool) error {
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return invalid(at, err)
		}
		name, _ := tok.(string)
		member := name
		if at != "" {
			member = at + "." + name
		}
		if slices.ContainsFunc(w.forbidden, func(f string) bool { return strings.EqualFold(f, name) }) {
			return &JSONError{Member: member, Name: name, Msg: "is not allowed here"}
		}
		if err := w.value(member, depth+1, secret || configSecrets[name]); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return invalid(at, err)
	}
	return nil
}

func invalid(at string, err error) error {
	var syn *json.SyntaxError
	msg := "is not valid JSON"
	if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "is not valid JSON (" + strings.TrimPrefix(err.Error(), "json: ") + ")"
	}
	return &JSONError{Member: at, Msg: msg}
}
