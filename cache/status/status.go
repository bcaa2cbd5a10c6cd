// Package status names the values of the x-gateway-cache-status response
// header. It imports nothing, so the cache, the handlers and the metrics
// (which the cache itself reports to) can all spell them one way.
package status

// Values of x-gateway-cache-status.
const (
	Hit          = "HIT"
	Miss         = "MISS"
	Refresh      = "REFRESH"
	Disabled     = "DISABLED"
	SemanticMiss = "SEMANTIC MISS"
	// SemanticHit is an answer the semantic cache found by similarity
	// rather than by exact key.
	SemanticHit = "SEMANTIC HIT"
)

// IsHit reports whether a status means the answer came from the cache
// (exact or semantic), so no provider was called and no tokens were
// spent.
func IsHit(s string) bool { return s == Hit || s == SemanticHit }
