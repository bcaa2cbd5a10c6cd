// Package oaiwire is the module's one model of OpenAI's wire format: the
// chat and embedding request shapes (read by the provider translators,
// written by the Responses translation), the chat completion, chunk and
// usage shapes written to clients, the error envelope, a server-sent-event
// decoder for provider streams, and the allocation-free JSON string writer
// every hand-built body uses (AppendString). Keeping one model means a
// field OpenAI adds is declared once, and every writer escapes text the
// same way.
package oaiwire
