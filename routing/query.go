package routing

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// matchQuery evaluates a conditional-routing query: keys in one object are
// ANDed, a plain value means equality, an object is an operator map, and
// $and / $or take arrays of sub-queries.
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
		v, ok := req.Metadata[strings.TrimPrefix(key, "metadata.")]
		return v, ok
	case strings.HasPrefix(key, "params."):
		r := gjson.GetBytes(req.Params, strings.TrimPrefix(key, "params."))
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
		re, err := regexp.Compile(pat)
		if err != nil {
			return false, fmt.Errorf("$regex: %v", err)
		}
		return present && re.MatchString(fmt.Sprint(got)), nil
	}
	return false, fmt.Errorf("unsupported operator %q (supported: $eq $ne $gt $gte $lt $lte $in $nin $regex $and $or)", op)
}

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
