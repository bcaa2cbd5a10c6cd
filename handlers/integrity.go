package handlers

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/byteview"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Integrity of provider answers. On the inference endpoints whose answers
// the gateway reads (chat, completions, embeddings), a 2xx non-stream
// answer from an OpenAI-format provider is held (up to max_response_body)
// and checked before the client sees any of it: valid, bounded JSON with
// the fields every client reads. A provider that answers 200 with an
// HTML page or a truncated body is then a 502 the router can retry or
// fall back from, not a success. Holding costs little: these answers are
// complete JSON documents that clients parse only once whole. Other
// operations (files, images, audio, pass-through) stay byte for byte.

// checkedAnswer reports whether op's 2xx answers are validated.
func checkedAnswer(op providers.Operation) bool {
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings:
		return true
	}
	return false
}

var (
	errNoChoices = errors.New("no choices")
	errNoData    = errors.New("no data")
)

// checkAnswer checks a complete 2xx answer of op and returns its usage,
// in one walk over its top-level keys (the answer is read in place, never
// copied: see view).
func checkAnswer(op providers.Operation, body []byte) (*providers.Usage, error) {
	if err := jsonlimit.Object(body); err != nil {
		return nil, err
	}
	var choices, data bool
	var usage *providers.Usage
	gjson.Parse(view(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "choices":
			choices = v.IsArray()
		case "data":
			data = v.IsArray()
		case "usage":
			if v.IsObject() {
				usage = usageFromJSON(v)
			}
		}
		return true
	})
	switch op {
	case providers.OpChat, providers.OpCompletions:
		if !choices {
			return nil, errNoChoices
		}
	case providers.OpEmbeddings:
		if !data {
			return nil, errNoData
		}
	}
	return usage, nil
}

// view is b as a string without a copy, for gjson to read
// (byteview.String); usage reading keeps only numbers.
func view(b []byte) string { return byteview.String(b) }

// isJSONBody reports whether an error answer is JSON: by its content type
// when it names JSON, else by its first byte.
func isJSONBody(h http.Header, body []byte) bool {
	if isJSON(h) {
		return true
	}
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}
