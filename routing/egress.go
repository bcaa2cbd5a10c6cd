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

// Origins is implemented by a Resolver that can tell the operator's
// records (declared in the Caddyfile) from records saved through the
// control-plane API. An address an operator's record names is trusted;
// one a record saved through the API names is client input, like an
// inline config's, and every connection to it (the upstream, and a
// service account's token_uri) passes the egress policy of the route
// that accepted the request, on the resolved address. A Resolver that
// does not implement Origins has its records treated as client input.
type Origins interface {
	// OperatorVirtualKey reports whether the virtual key name resolves
	// to a record declared by the operator.
	OperatorVirtualKey(name string) bool
	// OperatorConfig reports whether the saved config id resolves to a
	// record declared by the operator.
	OperatorConfig(id string) bool
}

// operatorVirtualKey reports whether r's virtual key name is the
// operator's (Origins); false when r cannot tell.
func operatorVirtualKey(r Resolver, name string) bool {
	o, ok := r.(Origins)
	return ok && o.OperatorVirtualKey(name)
}

// operatorConfig reports whether r's saved config id is the operator's
// (Origins); false when r cannot tell.
func operatorConfig(r Resolver, id string) bool {
	o, ok := r.(Origins)
	return ok && o.OperatorConfig(id)
}
