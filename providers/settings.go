package providers

import (
	"encoding/json"
	"reflect"
)

// Settings are the fields that say how to reach one provider: the slug,
// credentials, a custom host and each cloud's own fields. A virtual key
// stores exactly this; a configuration target carries it inline. The JSON
// names are the ones configs and x-gateway-* headers use.
type Settings struct {
	Provider   string `json:"provider,omitempty"`
	APIKey     string `json:"api_key,omitempty"`
	CustomHost string `json:"custom_host,omitempty"`

	VendorOrganization string `json:"vendor_organization,omitempty"`
	VendorProject      string `json:"vendor_project,omitempty"`

	ResourceName string       `json:"resource_name,omitempty"`
	DeploymentID string       `json:"deployment_id,omitempty"`
	APIVersion   string       `json:"api_version,omitempty"`
	Deployments  []Deployment `json:"deployments,omitempty"`

	CloudAAccessKeyID     string `json:"clouda_access_key_id,omitempty"`
	CloudASecretAccessKey string `json:"clouda_secret_access_key,omitempty"`
	CloudARegion          string `json:"clouda_region,omitempty"`
	CloudASessionToken    string `json:"clouda_session_token,omitempty"`
	// Bedrock batch inference (providers/bedrock/batch.go): the S3
	// location (s3://bucket/prefix) a native batch's lines and results
	// are stored under, the service role its job runs as and, for an
	// S3-compatible store or an endpoint of its own, the S3 endpoint.
	// Configuration only: no x-gateway-* header sets them.
	CloudABatchS3URI      string `json:"clouda_batch_s3_uri,omitempty"`
	CloudABatchRoleARN    string `json:"clouda_batch_role_arn,omitempty"`
	CloudABatchS3Endpoint string `json:"clouda_batch_s3_endpoint,omitempty"`

	CloudCProjectID          string          `json:"cloudc_project_id,omitempty"`
	CloudCRegion             string          `json:"cloudc_region,omitempty"`
	CloudCServiceAccountJSON json.RawMessage `json:"cloudc_service_account_json,omitempty"`
	// Vertex AI batch prediction (providers/vertex/batch.go): the Cloud
	// Storage location (gs://bucket/prefix) of a native batch's lines and
	// results and, for a store of its own, the Cloud Storage JSON API's
	// endpoint. Configuration only.
	CloudCBatchGCSURI      string `json:"cloudc_batch_gcs_uri,omitempty"`
	CloudCBatchGCSEndpoint string `json:"cloudc_batch_gcs_endpoint,omitempty"`

	CloudBRegion         string `json:"cloudb_region,omitempty"`
	CloudBDeploymentName string `json:"cloudb_deployment_name,omitempty"`
	CloudBDeploymentType string `json:"cloudb_deployment_type,omitempty"`
	CloudBEndpointName   string `json:"cloudb_endpoint_name,omitempty"`
	CloudBAPIVersion     string `json:"cloudb_api_version,omitempty"`
	// CloudBModelName comes only from the x-gateway-cloudb-model-name header.
	CloudBModelName string `json:"-"`
}

// Deployment is one entry of an Azure OpenAI deployments list, chosen by the
// request's model matching Alias.
type Deployment struct {
	DeploymentID string `json:"deployment_id"`
	Alias        string `json:"alias"`
	APIVersion   string `json:"api_version"`
	IsDefault    bool   `json:"is_default,omitempty"`
}

// Inherit fills every empty field of s from parent. A child's own value
// always wins, so a target can override what its parent set.
func (s *Settings) Inherit(parent *Settings) {
	if parent == nil {
		return
	}
	dst := reflect.ValueOf(s).Elem()
	src := reflect.ValueOf(parent).Elem()
	for i := 0; i < dst.NumField(); i++ {
		if dst.Field(i).IsZero() && !src.Field(i).IsZero() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// FillField sets a field by its JSON name when the field is still empty,
// used for header-given cloud fields, which refine but never override a
// configuration. Unknown names are ignored.
func (s *Settings) FillField(name, value string) {
	var dst *string
	switch name {
	case "resource_name":
		dst = &s.ResourceName
	case "deployment_id":
		dst = &s.DeploymentID
	case "api_version":
		dst = &s.APIVersion
	case "cloudb_model_name":
		dst = &s.CloudBModelName
	case "cloudc_project_id":
		dst = &s.CloudCProjectID
	case "cloudc_region":
		dst = &s.CloudCRegion
	case "clouda_access_key_id":
		dst = &s.CloudAAccessKeyID
	case "clouda_secret_access_key":
		dst = &s.CloudASecretAccessKey
	case "clouda_session_token":
		dst = &s.CloudASessionToken
	case "clouda_region":
		dst = &s.CloudARegion
	default:
		return
	}
	if *dst == "" {
		*dst = value
	}
}
