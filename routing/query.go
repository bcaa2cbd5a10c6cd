package routing

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Conditional-routing queries (strategy.conditions[].query) follow the
// reference gateway's Mongo-like syntax: keys in one object are ANDed; a
// plain value means equality; an object is a map of operators; $and and
// $or take arrays of sub-queries. Keys name request fields: metadata.*
// (the x-gateway-metadata object), params.* (the request body) and
// url.pathname, read at any depth (metadata.user.plan,
// params.messages.0.role), where the reference reads only two levels.

// operators lists the supported operators, in the order error messages
// name them.
const operators = "$eq $ne $gt $gte $lt $lte $in $nin $regex $and $or"

// validateQuery checks a query once, when the plan is built, so a bad
// operator or field is a 400 naming it whether or not the condition is
// ever reached.
func validateQuery(q map[string]any) error {
	for key, want := range q {
		if key == "$and" || key == "$or" {
			subs, ok := want.([]any)
			if !ok {
				return fmt.Errorf("%s needs an array of queries", key)
			}
			for i, s := range subs {
				sq, ok := s.(map[string]any)
				if !ok {
					return fmt.Errorf("%s[%d] must be a query object", key, i)
				}
				if err := validateQuery(sq); err != nil {
					return fmt.Errorf("%s[%d]: %w", key, i, err)
				}
			}
			continue
		}
		if strings.HasPrefix(key, "$") {
			return fmt.Errorf("unsupported operator %q at the top of a query (supported: %s)", key, operators)
		}
		if !knownField(key) {
			return fmt.Errorf("unknown field %q: query fields start with metadata., params. or are url.pathname", key)
		}
		ops, isOps := want.(map[string]any)
		if !isOps {
			continue
		}
		for op, arg := range ops {
			if err := validateOp(op, arg); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}

func knownField(key string) bool {
	return (strings.HasPrefix(key, "metadata.") && len(key) > len("metadata.")) ||
		(strings.HasPrefix(key, "params.") && len(key) > len("params.")) ||
		key == "url.pathname"
}

func validateOp(op string, arg any) error {
	switch op {
	case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
		return nil
	case "$in", "$nin":
		if _, ok := arg.([]any); !ok {
			return fmt.Errorf("%s needs an array", op)
		}
		return nil
	case "$regex":
		pat, ok := arg.(string)
		if !ok {
			return fmt.Errorf("$regex needs a string pattern")
		}
		if _, err := compileRegex(pat); err != nil {
			return fmt.Errorf("$regex: %v", err)
		}
		return nil
	}
	return fmt.Errorf("unsupported operator %q (supported: %s)", op, operators)
}

// matchQuery evaluates a query against the request.
func matchQuery(q map[string]any, req *Request) (bool, error) {
	for key, want := range q {
		switch key {
		case "$and", "$or":
			subs, ok := want.([]any)
			if !ok {
				return false, fmt.Errorf("%s needs an array of queries", key)
			}
			some, all := false, true
			for _, s := range subs {
				sq, ok := s.(map[string]any)
				if !ok {
					return false, fmt.Errorf("%s needs an array of queries", key)
				}
				m, err := matchQuery(sq, req)
				if err != nil {
					return false, err
				}
				some, all = some || m, all && m
			}
			if (key == "$and" && !all) || (key == "$or" && !some) {
				return false, nil
			}
			continue
		}
		got, present := lookup(key, req)
		ops, isOps := want.(map[string]any)
		if !isOps {
			if !present || !equal(got, want) {
				return false, nil
			}
			continue
		}
		for op, arg := range ops {
			m, err := applyOp(op, got, present, arg)
			if err != nil {
				return false, err
			}
			if !m {
				return false, nil
			}
		}
	}
	return true, nil
}

// lookup reads metadata.*, params.* (any depth) and url.pathname.
func lookup(key string, req *Request) (any, bool) {
	switch {
	case strings.HasPrefix(key, "metadata."):
		k := key[len("metadata."):]
		if v, ok := req.Metadata[k]; ok {
			return v, true
		}
		if req.MetadataRaw == "" || !strings.Contains(k, ".") {
			return nil, false
		}
		r := gjson.Get(req.MetadataRaw, k)
		if !r.Exists() {
			return nil, false
		}
		return r.Value(), true
	case strings.HasPrefix(key, "params."):
		r := gjson.GetBytes(req.Params, key[len("params."):])
		if !r.Exists() {
			return nil, false
		}
		return r.Value(), true
	case key == "url.pathname":
		return req.Path, true
	}
	return nil, false
}

func applyOp(op string, got any, present bool, arg any) (bool, error) {
	switch op {
	case "$eq":
		return present && equal(got, arg), nil
	case "$ne":
		return !present || !equal(got, arg), nil
	case "$gt", "$gte", "$lt", "$lte":
		a, ok1 := number(got)
		b, ok2 := number(arg)
		if !present || !ok1 || !ok2 {
			return false, nil
		}
		switch op {
		case "$gt":
			return a > b, nil
		case "$gte":
			return a >= b, nil
		case "$lt":
			return a < b, nil
		default:
			return a <= b, nil
		}
	case "$in", "$nin":
		list, ok := arg.([]any)
		if !ok {
			return false, fmt.Errorf("%s needs an array", op)
		}
		in := false
		for _, v := range list {
			if present && equal(got, v) {
				in = true
				break
			}
		}
		return in == (op == "$in"), nil
	case "$regex":
		pat, ok := arg.(string)
		if !ok {
			return false, fmt.Errorf("$regex needs a string pattern")
		}
		re, err := compileRegex(pat)
		if err != nil {
			return false, fmt.Errorf("$regex: %v", err)
		}
		return present && re.MatchString(fmt.Sprint(got)), nil
	}
	return false, fmt.Errorf("unsupported operator %q (supported: %s)", op, operators)
}

// equal compares numerically when both sides are numbers (or numeric
// strings, as metadata values are strings), else by their text.
func equal(a, b any) bool {
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			return fa == fb
		}
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case string:
		f, err := strconv.ParseFloat(t, 64)
		return f, err == nil
	}
	return 0, false
}

// regexCache keeps compiled patterns: configs are few and reused, so
// compiling per request would be wasted work. It is bounded because
// inline configs come from clients.
var regexCache = struct {
	sync.RWMutex
	m map[string]*regexp.Regexp
}{m: make(map[string]*regexp.Regexp)}

const regexCacheMax = 512

func compileRegex(pat string) (*regexp.Regexp, error) {
	regexCache.RLock()
	re := regexCache.m[pat]
	regexCache.RUnlock()
	if re != nil {
		return re, nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	regexCache.Lock()
	if len(regexCache.m) >= regexCacheMax {
		clear(regexCache.m)
	}
	regexCache.m[pat] = re
	regexCache.Unlock()
	return re, nil
}
