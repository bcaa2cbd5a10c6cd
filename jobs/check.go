// Package jobs checks provider job requests (batches, fine-tuning jobs)
// against the specification's limits before any provider is called, and
// says which providers have OpenAI's job APIs. A violation is a 400 whose
// message and param name the offending field.
package jobs

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Limits of the specification (SPEC.md, Limits).
const (
	// MaxMetadataPairs, MaxMetadataKey and MaxMetadataValue bound batch
	// metadata (characters, not bytes).
	MaxMetadataPairs = 16
	MaxMetadataKey   = 64
	MaxMetadataValue = 512
	// DefaultListLimit is the page size of batch and fine-tuning lists.
	DefaultListLimit = 20
	// MaxBatchListLimit is the largest batch list page.
	MaxBatchListLimit = 100
	// MaxIntegrations bounds a fine-tuning job's integrations.
	MaxIntegrations = 5
	// MaxSuffix is the longest fine-tuning suffix (OpenAI: 1–64).
	MaxSuffix = 64
)

// Completion windows. WindowImmediate exists only for managed batches.
const (
	Window24h       = "24h"
	WindowImmediate = "immediate"
)

// BatchEndpoints are the endpoints a batch may target (SPEC narrows
// OpenAI's list to these three).
var BatchEndpoints = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"}

// Check validates a job request: batch create and list, fine-tuning job
// create and list. It returns nil for any other method and path, so the
// handler can call it for every request. path may carry the /v1 prefix or
// not. The error is an *apierror.Error.
func Check(method, path string, query url.Values, body []byte) error {
	p := strings.TrimSuffix(strings.TrimPrefix(path, "/v1"), "/")
	switch {
	case method == http.MethodPost && p == "/batches":
		return CheckBatchCreate(body)
	case method == http.MethodGet && p == "/batches":
		_, err := BatchListLimit(query)
		return err
	case method == http.MethodPost && p == "/fine_tuning/jobs":
		return CheckFineTuningCreate(body)
	case method == http.MethodGet && p == "/fine_tuning/jobs":
		_, err := FineTuningListLimit(query)
		return err
	}
	return nil
}

// parseObject checks body with jsonlimit and that it is an object.
func parseObject(body []byte) (gjson.Result, error) {
	if len(body) == 0 {
		return gjson.Result{}, apierror.BadRequest("", "the request body must be a JSON object")
	}
	if err := jsonlimit.Object(body); err != nil {
		return gjson.Result{}, apierror.BadRequest("", "the request body must be a JSON object: %v", err)
	}
	return gjson.ParseBytes(body), nil
}

func requiredString(obj gjson.Result, field string) (string, error) {
	v := obj.Get(gjson.Escape(field))
	if !v.Exists() || v.Type == gjson.Null {
		return "", apierror.BadRequest(field, "'%s' is required", field)
	}
	if v.Type != gjson.String {
		return "", apierror.BadRequest(field, "'%s' must be a string", field)
	}
	if v.Str == "" {
		return "", apierror.BadRequest(field, "'%s' must not be empty", field)
	}
	return v.Str, nil
}

// CheckBatchCreate validates a POST /v1/batches body.
func CheckBatchCreate(body []byte) error {
	obj, err := parseObject(body)
	if err != nil {
		return err
	}
	if _, err := requiredString(obj, "input_file_id"); err != nil {
		return err
	}
	ep, err := requiredString(obj, "endpoint")
	if err != nil {
		return err
	}
	if !validEndpoint(ep) {
		return apierror.BadRequest("endpoint", "'endpoint' must be one of %s", strings.Join(BatchEndpoints, ", "))
	}
	w, err := requiredString(obj, "completion_window")
	if err != nil {
		return err
	}
	if w != Window24h && w != WindowImmediate {
		return apierror.BadRequest("completion_window", "'completion_window' must be %q or %q", Window24h, WindowImmediate)
	}
	return CheckMetadata(obj.Get("metadata"))
}

func validEndpoint(ep string) bool {
	for _, e := range BatchEndpoints {
		if ep == e {
			return true
		}
	}
	return false
}

// CheckMetadata validates a metadata value: absent, null, or an object of
// at most 16 string values, keys up to 64 characters, values up to 512.
func CheckMetadata(md gjson.Result) error {
	if !md.Exists() || md.Type == gjson.Null {
		return nil
	}
	if !md.IsObject() {
		return apierror.BadRequest("metadata", "'metadata' must be an object")
	}
	n := 0
	var err error
	md.ForEach(func(k, v gjson.Result) bool {
		n++
		switch {
		case n > MaxMetadataPairs:
			err = apierror.BadRequest("metadata", "'metadata' may hold at most %d key-value pairs", MaxMetadataPairs)
		case utf8.RuneCountInString(k.Str) > MaxMetadataKey:
			err = apierror.BadRequest("metadata", "'metadata' keys may be at most %d characters", MaxMetadataKey)
		case v.Type != gjson.String:
			err = apierror.BadRequest("metadata", "'metadata' values must be strings")
		case utf8.RuneCountInString(v.Str) > MaxMetadataValue:
			err = apierror.BadRequest("metadata", "'metadata' values may be at most %d characters", MaxMetadataValue)
		}
		return err == nil
	})
	return err
}

// BatchListLimit returns the page size of GET /v1/batches: 1–100,
// default 20.
func BatchListLimit(q url.Values) (int, error) {
	return listLimit(q, MaxBatchListLimit)
}

// FineTuningListLimit returns the page size of GET /v1/fine_tuning/jobs:
// any positive integer, default 20.
func FineTuningListLimit(q url.Values) (int, error) {
	return listLimit(q, 0)
}

func listLimit(q url.Values, max int) (int, error) {
	if _, ok := q["limit"]; !ok {
		return DefaultListLimit, nil
	}
	s := q.Get("limit")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || (max > 0 && n > max) {
		if max > 0 {
			return 0, apierror.BadRequest("limit", "'limit' must be an integer from 1 to %d", max)
		}
		return 0, apierror.BadRequest("limit", "'limit' must be a positive integer")
	}
	return n, nil
}
