package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Strict reading and redaction of the JSON the keys API stores and
// answers (request bodies, saved configs). Both walk the token stream of
// encoding/json's Decoder, which unescapes member names, so
// "custom\u005fhost" is seen as custom_host, and a member given twice
// (after unescaping) is refused instead of one copy silently winning.
// internal/jsonlimit is gaining the same duplicate refusal for the
// inference path; this walker is the keys API's until the two merge.

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
	return w.run(raw, io.Discard)
}

// CheckConfigJSON is CheckJSON for a config saved through the API: no
// custom_host anywhere, and no credential given as the redacted "****"
// (a config read back and sent again would otherwise store the mask as
// its key).
func CheckConfigJSON(raw []byte) error {
	w := walker{forbidden: []string{"custom_host"}, refuseMask: true}
	return w.run(raw, io.Discard)
}

// RedactConfig returns a copy of a saved config (or any JSON) with every
// credential replaced by "****", in place and in order: the members a
// virtual key seals (api_key, clouda_secret_access_key,
// clouda_session_token, cloudc_service_account_json), and every value of
// a "headers" member (a webhook's or a log hook's headers, given as an
// object or as a JSON string of one), wherever they are.
func RedactConfig(raw []byte) ([]byte, error) {
	var out bytes.Buffer
	w := walker{redact: true}
	if err := w.run(raw, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Redacted is what RedactConfig puts in place of a credential.
const Redacted = "****"

// secretMembers are the credential members of provider settings: those
// split seals (records.go), under their configuration names.
var secretMembers = []string{"api_key", "clouda_secret_access_key", "clouda_session_token", "cloudc_service_account_json"}

type walker struct {
	forbidden  []string
	redact     bool
	refuseMask bool
	dec        *json.Decoder
	out        io.Writer
}

func (w *walker) run(raw []byte, out io.Writer) error {
	w.dec = json.NewDecoder(bytes.NewReader(raw))
	w.dec.UseNumber()
	w.out = out
	if err := w.value("", 0, false); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return &JSONError{Msg: "the JSON holds more than one value"}
	}
	return nil
}

func (w *walker) write(s string) { _, _ = io.WriteString(w.out, s) }

func (w *walker) writeString(s string) {
	b, _ := json.Marshal(s)
	_, _ = w.out.Write(b)
}

// value copies one value; mask replaces every scalar in it by Redacted.
func (w *walker) value(at string, depth int, mask bool) error {
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
			return w.object(at, depth, mask)
		}
		if t != '[' {
			return &JSONError{Member: at, Msg: "is not valid JSON"}
		}
		w.write("[")
		for i := 0; w.dec.More(); i++ {
			if i > 0 {
				w.write(",")
			}
			if err := w.value(fmt.Sprintf("%s[%d]", at, i), depth+1, mask); err != nil {
				return err
			}
		}
		if _, err := w.dec.Token(); err != nil {
			return invalid(at, err)
		}
		w.write("]")
	case string:
		if mask && w.refuseMask && t == Redacted {
			return &JSONError{Member: at, Name: "****", Msg: "is the redacted \"****\" an answer shows: send the credential itself"}
		}
		if mask {
			w.writeString(Redacted)
		} else {
			w.writeString(t)
		}
	case json.Number:
		w.scalar(mask, t.String())
	case bool:
		w.scalar(mask, fmt.Sprint(t))
	case nil:
		w.write("null") // nothing to hide in a null
	}
	return nil
}

func (w *walker) scalar(mask bool, s string) {
	if mask {
		w.writeString(Redacted)
		return
	}
	w.write(s)
}

func (w *walker) object(at string, depth int, mask bool) error {
	w.write("{")
	seen := make(map[string]bool)
	for i := 0; w.dec.More(); i++ {
		tok, err := w.dec.Token()
		if err != nil {
			return invalid(at, err)
		}
		name, _ := tok.(string)
		member := name
		if at != "" {
			member = at + "." + name
		}
		if seen[name] {
			return &JSONError{Member: member, Name: name, Msg: "is given more than once"}
		}
		seen[name] = true
		if slices.Contains(w.forbidden, name) {
			return &JSONError{Member: member, Name: name, Msg: "is not allowed here"}
		}
		if i > 0 {
			w.write(",")
		}
		w.writeString(name)
		w.write(":")
		m := mask
		if (w.redact || w.refuseMask) && (name == "headers" || slices.Contains(secretMembers, name)) {
			m = true
		}
		if w.redact && m && !mask && name != "headers" {
			// A credential of any shape becomes one string.
			if err := w.skip(member, depth+1); err != nil {
				return err
			}
			w.writeString(Redacted)
			continue
		}
		if err := w.value(member, depth+1, m); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return invalid(at, err)
	}
	w.write("}")
	return nil
}

// skip reads one value (strictly) without copying it.
func (w *walker) skip(at string, depth int) error {
	out := w.out
	w.out = io.Discard
	err := w.value(at, depth, false)
	w.out = out
	return err
}

func invalid(at string, err error) error {
	var syn *json.SyntaxError
	msg := "is not valid JSON"
	if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "is not valid JSON (" + strings.TrimPrefix(err.Error(), "json: ") + ")"
	}
	return &JSONError{Member: at, Msg: msg}
}
