// Package messages serves Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens) over any provider: it validates a Messages
// request as Anthropic does (Parse), translates it to an OpenAI chat
// completion for targets that do not speak it (ToChat), translates the
// chat answer back (FromChat) and a chat stream into Anthropic's event
// sequence (StreamWriter), writes errors in Anthropic's shape
// ({"type":"error","error":{"type","message"}}), and estimates a prompt's
// tokens for count_tokens where the target cannot count them.
//
// It is pure translation: no I/O, no gateway state. The handler's adapter
// (handlers/messages.go) decides per target whether the body goes as it
// is (Anthropic, and Claude on Bedrock and Vertex AI) or through here.
// docs/messages.md holds the field-by-field translation table.
package messages
