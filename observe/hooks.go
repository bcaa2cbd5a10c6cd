package observe

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

const varDoneHooks = "llm_gateway.done_hooks"

// OnDone registers fn to run with the request's final entry once
// llm_gateway has answered. Handlers that run before the gateway (the
// rate limiter settling token reservations) use it to learn the outcome
// and usage without wrapping the response writer.
func OnDone(r *http.Request, fn func(*Entry)) {
	hooks, _ := caddyhttp.GetVar(r.Context(), varDoneHooks).([]func(*Entry))
	caddyhttp.SetVar(r.Context(), varDoneHooks, append(hooks, fn))
}

// RunDone calls the hooks registered for r.
func RunDone(r *http.Request, e *Entry) {
	hooks, _ := caddyhttp.GetVar(r.Context(), varDoneHooks).([]func(*Entry))
	for _, fn := range hooks {
		fn(e)
	}
}
