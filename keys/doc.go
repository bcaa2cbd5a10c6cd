// Package keys keeps the gateway's managed records: gateway API keys,
// virtual keys (provider credentials, encrypted at rest) and saved configs
// created through the control-plane API, and the audit log of their
// changes. Records live in a kvstore.KV (Caddy's storage, or Redis when
// the llm app has one) and are served from memory: looking a key up is one
// HMAC and one map read however many keys exist. Every write bumps a
// change counter (and, with Redis, is published), so every instance sees
// it within a poll interval (see sync.go).
//
// A gateway key is never stored: only its HMAC-SHA256 under a server
// secret and its first characters for display. The API (package
// keys/keysapi) and the app's authentication use this package; the
// Caddyfile's records stay in the llm app and win over these.
package keys
