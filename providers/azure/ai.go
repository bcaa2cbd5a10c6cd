package azure

import (
	"net/url"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// FoundryAPIVersion is sent to a Foundry resource's /models endpoint when
// no cloudb_api_version is given: that endpoint requires api-version, and
// this is the version its reference documents.
const FoundryAPIVersion = "2024-05-01-preview"

// AI is the azure-ai provider (Azure AI Foundry / Azure AI model
// inference). Hosts, per cloudb_deployment_type:
//
//   - serverless: https://{cloudb_endpoint_name}.{cloudb_region}.models.ai.azure.com/v1/{path}
//     (cloudb_deployment_name, lower-cased, stands in for a missing
//     endpoint name, as the config's serverless key group allows);
//   - managed: https://{cloudb_endpoint_name}.{cloudb_region}.inference.ml.azure.com/v1/{path}
//     with azureml-model-deployment: {cloudb_deployment_name} to pick the
//     deployment behind the endpoint;
//   - no type but resource_name: the Foundry resource's model inference
//     endpoint https://{resource_name}.services.ai.azure.com/models/{path},
//     which routes on the body's model.
//
// cloudb_api_version, when given, is sent as ?api-version=. custom_host
// replaces scheme and host; its path, if any, replaces the /v1 or /models
// prefix.
type AI struct{}

// Prepare implements providers.Provider.
func (AI) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	if s.APIKey == "" {
		return missingKey(SlugAI)
	}
	for _, f := range [...]struct{ name, v string }{
		{"cloudb_endpoint_name", s.CloudBEndpointName},
		{"cloudb_region", s.CloudBRegion},
		{"resource_name", s.ResourceName},
	} {
		if err := hostLabel(f.name, f.v); err != nil {
			return err
		}
	}
	version := s.CloudBAPIVersion
	keyHeader := "" // serverless and managed endpoints take the key as a bearer token
	prefix := "/v1"
	var host string
	switch s.CloudBDeploymentType {
	case "serverless":
		name := s.CloudBEndpointName
		if name == "" {
			name = s.CloudBDeploymentName
			if err := hostLabel("cloudb_deployment_name", name); err != nil {
				return err
			}
		}
		if s.CustomHost == "" {
			if name == "" {
				return apierror.BadRequest("cloudb_endpoint_name", "azure-ai serverless deployments need cloudb_endpoint_name (or cloudb_deployment_name)")
			}
			if s.CloudBRegion == "" {
				return apierror.BadRequest("cloudb_region", "azure-ai serverless deployments need cloudb_region")
			}
			host = lower(name) + "." + s.CloudBRegion + ".models.ai.azure.com"
		}
	case "managed":
		if s.CustomHost == "" {
			if s.CloudBEndpointName == "" {
				return apierror.BadRequest("cloudb_endpoint_name", "azure-ai managed deployments need cloudb_endpoint_name")
			}
			if s.CloudBRegion == "" {
				return apierror.BadRequest("cloudb_region", "azure-ai managed deployments need cloudb_region")
			}
			host = s.CloudBEndpointName + "." + s.CloudBRegion + ".inference.ml.azure.com"
		}
		if s.CloudBDeploymentName != "" {
			u.Header.Set("azureml-model-deployment", s.CloudBDeploymentName)
		}
	case "":
		switch {
		case s.ResourceName != "":
			host, prefix, keyHeader = s.ResourceName+".services.ai.azure.com", "/models", "api-key"
			if version == "" {
				version = FoundryAPIVersion
			}
		case s.CustomHost == "":
			return apierror.BadRequest("cloudb_deployment_type", "provider azure-ai needs cloudb_deployment_type (serverless or managed) with cloudb_endpoint_name and cloudb_region, or resource_name for a Foundry resource, or custom_host")
		}
	default:
		return apierror.BadRequest("cloudb_deployment_type", "cloudb_deployment_type must be serverless or managed, got %q", s.CloudBDeploymentType)
	}

	var target url.URL
	if s.CustomHost != "" {
		base, err := providers.CustomBase(s.CustomHost, "")
		if err != nil {
			return err
		}
		target = *base
		if target.Path == "" {
			target.Path = prefix
		}
	} else {
		target = url.URL{Scheme: "https", Host: host, Path: prefix}
	}
	target.Path += c.Path
	target.RawQuery = c.RawQuery
	if version != "" {
		target.RawQuery = mergeQuery(c.RawQuery, version)
	}
	u.Method, u.URL, u.Body = c.Method, &target, withModelName(c, s, c.Body)
	setAuth(u.Header, s.APIKey, keyHeader)
	return nil
}

// Translator implements providers.Provider: these endpoints speak
// OpenAI's format.
func (AI) Translator(providers.Operation) providers.Translator { return nil }

// lower lower-cases an ASCII host label (host names are case-insensitive;
// serverless deployment names are shown capitalised in the portal).
func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
