// Package upstream connects the gateway to provider hosts through Caddy's
// http transport: the request variable that names the TLS server, and a
// dial-time guard that keeps client-given custom hosts away from internal
// networks.
package upstream

// VarServerName is the request variable an attempt sets to the provider's
// host name before a TLS round trip: the gateway's TLS transports take
// their server name from it ({http.vars.llm_gateway.upstream_host}), so a
// guarded dial to a checked IP literal still verifies the certificate
// against the host name.
const VarServerName = "llm_gateway.upstream_host"
