// Package guardrails runs a config's hooks and guardrails with the
// reference gateway's semantics (research/portkey.md §7, wave2.md §3):
// verdicts, deny, feedback, mutators, async hooks and the hook_results
// object. Checks are Caddy modules in the llm.checks namespace (the
// defaults are in package checks); the runner finds them by name, so a
// check built in with xcaddy is named in a config like a built-in one.
//
// # Use in the request pipeline
//
// One Runner per gateway handler (it caches compiled hooks):
//
//	rn := &guardrails.Runner{
//		Env:   guardrails.Env{Client: guardrails.NewEgressClient(guard)}, // custom_host_allow policy
//		Saved: llmApp.Guardrail,                                          // string ids of saved guardrails
//	}
//
// Before the provider call, per leaf target (routing merges
// before_request_hooks and input_guardrails into Target.BeforeRequestHooks):
//
//	req := &guardrails.Request{Body: body, Type: guardrails.RequestType(string(op), stream),
//		Provider: slug, Model: model, Metadata: headers.Metadata, Stream: stream}
//	before, err := rn.Before(ctx, target.BeforeRequestHooks, req) // nil, nil without hooks: no allocation
//	if err != nil { /* 400 (*apierror.Error) naming the hook and field */ }
//	if before.Denied() { /* status 446, body guardrails.DenyBody(before, nil); the provider is not called;
//	                        446 then counts for retry/strategy on_status_codes and fallback */ }
//	if before.Transformed { body = before.Body }
//
// After a JSON answer:
//
//	after, err := rn.After(ctx, target.AfterRequestHooks, req, &guardrails.Answer{Body: answer, Status: status})
//	if after.Denied() { /* withhold the answer: 446 with DenyBody(before, after) */ }
//	if after.Transformed { answer = after.Body }
//	status = guardrails.Status(before, after, status)           // 446 / 246 / upstream
//	if guardrails.HasResults(before, after) { answer = guardrails.AttachResults(answer, before, after) }
//
// For a stream, input checks decide before the first byte (a 446 JSON
// body, never a half stream). Output checks get the assembled text
// (StreamText collects it from the chunks) in Answer.Text with a nil Body;
// send StreamEvent(before, after) before "data: [DONE]". If the after
// hooks can deny (HooksCanDeny), hold the stream until the verdict.
//
// Async hooks never delay the answer: after it was written, they go to
// the process's bounded AsyncPool (the llm app owns it), which drops what
// does not fit rather than holding every request behind a slow webhook:
//
//	if before.HasAsync() {
//		pool.Submit(before.AsyncSize(), func(ctx context.Context) { before.RunAsync(ctx, logResults) })
//	}
//
// Log Results(before, after) (it marshals to the hook_results object) with
// the request's log entry.
package guardrails
