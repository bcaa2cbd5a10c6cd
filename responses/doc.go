// Package responses gives providers without a native Responses API
// (Anthropic, Bedrock, Gemini, Vertex, Cohere, OpenAI-compatible servers
// that only speak Chat Completions) OpenAI's Responses API, as a
// response-format adapter around a chat call:
//
//   - Parse reads and bounds-checks a Responses create body (for every
//     target, native or translated);
//   - ToChat turns it, with the replayed history of previous_response_id,
//     into an OpenAI Chat Completions body, which the gateway's existing
//     translators carry to each provider;
//   - FromChat turns the chat answer back into a Response object, and
//     StreamWriter turns a chat SSE stream into the Responses event
//     sequence;
//   - Store keeps responses (store defaults to true) for retrieval,
//     deletion, input_items and previous_response_id chaining;
//   - DropOldest and IsContextOverflow implement truncation "auto".
//
// The package never calls a provider itself. A translated create runs:
//
//	r, err := Parse(body)                              // 400s before any provider call
//	items, err := store.Replay(ctx, ws, r)             // history + input, references resolved; 400 when unknown or beyond MaxReplay
//	chat, err := ToChat(r, items)                      // 400 for built-in tools etc.
//	// … the chat call through routing, retries, fallback …
//	// on IsContextOverflow(status, body): with r.TruncationAuto(), once,
//	// items, ok = DropOldest(items) and call again; else OverflowError()
//	resp, err := FromChat(answer, r)                   // or NewStreamWriter for streams
//	store.Save(ctx, RecordOf(ws, r, resp))             // when r.Stored(), before answering
//
// e2e_test.go's adapterServer is this wiring in full.
package responses
