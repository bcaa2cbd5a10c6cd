package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Identity names the upstream a target reaches, for breaker and cache
// keys: "provider|host|credentials". The host is the custom_host when one
// is set, else the provider's default endpoint, which for cloud providers
// depends on their location fields (resource, deployment, region,
// project, endpoint), so those stand in for it. Credentials are a
// fingerprint, never the secret itself. It is computed once per target.
func (t *Target) Identity() string {
	if t.identity == "" {
		t.identity = t.Settings.Provider + "|" + upstreamHost(&t.Settings) + "|" + CredentialFingerprint(&t.Settings)
	}
	return t.identity
}

// Host returns the upstream host part of the target's identity, for logs.
func (t *Target) Host() string { return upstreamHost(&t.Settings) }

func upstreamHost(s *providers.Settings) string {
	if s.CustomHost != "" {
		return strings.TrimRight(strings.ToLower(s.CustomHost), "/")
	}
	loc := []string{s.ResourceName, s.DeploymentID, s.CloudARegion, s.CloudBRegion,
		s.CloudBEndpointName, s.CloudBDeploymentName, s.CloudCRegion, s.CloudCProjectID}
	for _, v := range loc {
		if v != "" {
			return "default:" + strings.Join(loc, ",")
		}
	}
	return "default"
}

// CredentialFingerprint is the first 16 hex digits (64 bits) of a SHA-256
// over a target's credentials and account scoping: enough to tell keys
// apart, useless for recovering them. Session tokens are left out: they
// rotate while naming the same principal.
func CredentialFingerprint(s *providers.Settings) string {
	h := sha256.New()
	for _, v := range []string{s.APIKey, s.CloudAAccessKeyID, s.CloudASecretAccessKey,
		string(s.CloudCServiceAccountJSON), s.VendorOrganization, s.VendorProject} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:8])
}
