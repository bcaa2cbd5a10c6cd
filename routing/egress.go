package routing

import (
	"bytes"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// addressFields are the settings, by JSON name, from which a provider
// builds an outbound host name or that name a URL the gateway fetches:
// where a request goes, as opposed to what it carries.
var addressFields = map[string]bool{
	"custom_host":                 true,
	"resource_name":               true,
	"clouda_region":               true,
	"cloudb_region":               true,
	"cloudb_endpoint_name":        true,
	"cloudb_deployment_name":      true,
	"cloudc_region":               true,
	"cloudc_project_id":           true,
	"cloudc_service_account_json": true,
}

// HasAddress reports whether s sets any field an outbound address is built
// from (custom_host, Azure resource and endpoint names, cloud regions, the
// Vertex project and service account, whose token_uri is fetched).
func HasAddress(s *providers.Settings) bool {
	return s.CustomHost != "" || s.ResourceName != "" || s.CloudARegion != "" ||
		s.CloudBRegion != "" || s.CloudBEndpointName != "" || s.CloudBDeploymentName != "" ||
		s.CloudCRegion != "" || s.CloudCProjectID != "" || len(s.CloudCServiceAccountJSON) > 0
}

// sameAddress reports whether a and b agree on every address field.
func sameAddress(a, b *providers.Settings) bool {
	return a.CustomHost == b.CustomHost && a.ResourceName == b.ResourceName && a.CloudARegion == b.CloudARegion &&
		a.CloudBRegion == b.CloudBRegion && a.CloudBEndpointName == b.CloudBEndpointName &&
		a.CloudBDeploymentName == b.CloudBDeploymentName && a.CloudCRegion == b.CloudCRegion &&
		a.CloudCProjectID == b.CloudCProjectID && bytes.Equal(a.CloudCServiceAccountJSON, b.CloudCServiceAccountJSON)
}
