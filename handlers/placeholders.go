package handlers

import "strings"

// PlaceholderPrefix starts the placeholders the gateway sets in the
// request's Caddy replacer, so `header`, `log_append`, `map` and the like
// can use what the gateway decided:
//
//	{http.llm.trace_id}                the request's trace id
//	{http.llm.key_name}                the gateway key's name
//	{http.llm.workspace}               the key's workspace id
//	{http.llm.provider}                the provider that answered
//	{http.llm.model}                   the model sent (or answered from cache)
//	{http.llm.cache_status}            HIT, MISS, REFRESH, DISABLED, …
//	{http.llm.last_used_option_index}  the config path of the answering target
//	{http.llm.retry_count}             retries made on that target
//	{http.llm.tokens.prompt}           prompt tokens (once the answer ended)
//	{http.llm.tokens.completion}       completion tokens
//	{http.llm.tokens.total}            total tokens
//
// Values are read when the placeholder is evaluated: response headers see
// the state when the gateway writes its headers (use `header >Name …` to
// defer), log_append sees the final state. Unknown values are empty.
const PlaceholderPrefix = "http.llm."

// placeholder is the replacer function registered for each request; it
// reads the flight lazily, so an unused placeholder costs nothing. Until
// the log entry is filled (a response header evaluated as the answer
// starts), values come from the parsed request and the answer sent.
func (f *flight) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, PlaceholderPrefix)
	if !ok {
		return nil, false
	}
	if !f.filled {
		if v, ok := f.livePlaceholder(name); ok {
			return v, true
		}
	}
	e := &f.entry
	info := f.out.info
	switch name {
	case "trace_id":
		return e.TraceID, true
	case "key_name":
		return e.KeyName, true
	case "workspace":
		return e.Workspace, true
	case "provider":
		if info != nil && info.target != nil {
			return info.target.Settings.Provider, true
		}
		return e.Provider, true
	case "model":
		return e.Model, true
	case "cache_status":
		if e.CacheState == "" && info != nil {
			return info.label, true
		}
		return e.CacheState, true
	case "last_used_option_index":
		if info == nil || info.target == nil {
			return "", true
		}
		return info.target.Path, true
	case "retry_count":
		if info == nil || info.target == nil {
			return "", true
		}
		return info.try, true
	case "tokens.prompt", "tokens.completion", "tokens.total":
		u := e.Usage
		if u == nil {
			return "", true
		}
		switch name {
		case "tokens.prompt":
			return u.PromptTokens, true
		case "tokens.completion":
			return u.CompletionTokens, true
		}
		return u.TotalTokens, true
	}
	return nil, false
}

// livePlaceholder is a placeholder's value while the request runs, for
// the names whose value finish takes from the request; false when there
// is none to read yet (the entry's value stands).
func (f *flight) livePlaceholder(name string) (any, bool) {
	switch name {
	case "trace_id":
		return f.out.traceID, f.out.traceID != ""
	}
	if f.q == nil {
		return nil, false
	}
	switch name {
	case "key_name", "workspace":
		id := f.q.Identity
		if id == nil {
			return nil, false
		}
		if name == "key_name" {
			return id.Name, true
		}
		return id.WorkspaceID, true
	case "model":
		return f.q.Call.Model, true
	}
	return nil, false
}
