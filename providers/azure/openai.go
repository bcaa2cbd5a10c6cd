package azure

import (
	"net/url"
	"sort"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// OpenAI is the azure-openai provider.
//
// URLs: https://{resource_name}.openai.azure.com/openai (or custom_host,
// which replaces that whole base as in the reference gateway; a custom
// host without a path gets /openai) +
//   - /deployments/{deployment}/{path}?api-version={v} for the
//     deployment-scoped operations (chat, completions, embeddings, images,
//     audio);
//   - /{path}?api-version={v} for everything else (files, batches,
//     responses, models, any other path), which Azure serves per resource;
//   - /v1/{path} when api_version is "v1", "preview" or "latest"
//     (Azure's version-less API; the latter two are sent as api-version),
//     where the model stays in the body and no deployment is needed.
//
// The deployment and version come from the deployments entry whose alias
// equals the request's model (else deployment_id, else the is_default
// entry), or from deployment_id and api_version.
type OpenAI struct{}

// Prepare implements providers.Provider.
func (OpenAI) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	if s.APIKey == "" {
		return missingKey(SlugOpenAI)
	}
	base, err := openAIBase(s)
	if err != nil {
		return err
	}
	dep, version, aliased, err := pickDeployment(c.Model, s)
	if err != nil {
		return err
	}
	body := c.Body
	target := *base
	switch {
	case c.Path == realtimePath:
		// A Realtime WebSocket: the deployment goes in the query.
		if err := realtimeURL(&target, c.RawQuery, dep, version); err != nil {
			return err
		}
	case isV1(version):
		target.Path += "/v1" + c.Path
		v := version
		if v == "v1" {
			v = ""
		}
		target.RawQuery = mergeQuery(c.RawQuery, v)
		// The v1 API routes on the body's model, which must name the
		// deployment: an alias the deployments list resolved is replaced.
		if aliased && dep != "" && jsonlimit.Check(body) == nil {
			if b, err := sjson.SetBytes(body, "model", dep); err == nil {
				body = b
			}
		}
	default:
		if version == "" {
			version = queryVersion(c.RawQuery)
		}
		if version == "" {
			return apierror.BadRequest("api_version", "provider azure-openai needs api_version (a dated version such as 2024-10-21, or \"v1\"): set it in the config, a deployments entry or the x-gateway-cloudb-api-version header")
		}
		if deploymentScoped(c.Op) {
			if dep == "" {
				return apierror.BadRequest("deployment_id", "provider azure-openai needs deployment_id for %s: set it in the config, the deployments list or the x-gateway-cloudb-deployment-id header", c.Op)
			}
			target.Path += "/deployments/" + dep + c.Path
			target.RawPath = base.EscapedPath() + "/deployments/" + url.PathEscape(dep) + (&url.URL{Path: c.Path}).EscapedPath()
		} else {
			target.Path += c.Path
		}
		target.RawQuery = mergeQuery(c.RawQuery, version)
	}
	body = withModelName(c, s, body)
	if c.Stream && (c.Op == providers.OpChat || c.Op == providers.OpCompletions) && streamUsage(version) {
		// Ask for usage in every stream so the gateway can account for
		// it; the extra chunk is stripped when the client did not ask.
		body, c.UsageAdded = providers.WithStreamUsage(body)
	}
	u.Method, u.URL, u.Body = c.Method, &target, body
	setAuth(u.Header, s.APIKey, "api-key")
	return nil
}

// realtimePath is the Realtime API's WebSocket path.
const realtimePath = "/realtime"

// realtimeURL sets target (the resource's /openai base) to Azure's
// Realtime WebSocket: /openai/realtime?api-version={dated}&deployment={d}
// for a dated version (the preview API), /openai/v1/realtime?model={d}
// for the version-less API (GA). The client's model names the
// deployment through the deployments list, as for HTTP calls; without a
// list it is taken as the deployment's name.
func realtimeURL(target *url.URL, rawQuery, dep, version string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		q = url.Values{}
	}
	if dep == "" {
		dep = q.Get("deployment")
	}
	if dep == "" {
		dep = q.Get("model")
	}
	if dep == "" {
		return apierror.BadRequest("deployment_id", "provider azure-openai needs a deployment for a realtime session: the model query parameter, the deployments list or deployment_id")
	}
	if isV1(version) {
		target.Path += "/v1" + realtimePath
		q.Del("deployment")
		q.Set("model", dep)
		if version == "v1" {
			q.Del("api-version")
		} else {
			q.Set("api-version", version)
		}
		target.RawQuery = q.Encode()
		return nil
	}
	if version == "" {
		version = q.Get("api-version")
	}
	if version == "" {
		return apierror.BadRequest("api_version", "provider azure-openai needs api_version for a realtime session (a dated preview version such as 2024-10-01-preview, or \"v1\")")
	}
	target.Path += realtimePath
	q.Del("model")
	q.Set("deployment", dep)
	q.Set("api-version", version)
	target.RawQuery = q.Encode()
	return nil
}

// Translator implements providers.Provider: Azure OpenAI speaks OpenAI's
// format.
func (OpenAI) Translator(providers.Operation) providers.Translator { return nil }

func openAIBase(s *providers.Settings) (*url.URL, error) {
	if s.CustomHost != "" {
		return providers.CustomBase(s.CustomHost, "/openai")
	}
	if s.ResourceName == "" {
		return nil, apierror.BadRequest("resource_name", "provider azure-openai needs resource_name (the x-gateway-cloudb-resource-name header, or resource_name in a config or virtual key), or custom_host")
	}
	if err := hostLabel("resource_name", s.ResourceName); err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "https", Host: s.ResourceName + ".openai.azure.com", Path: "/openai"}, nil
}

// pickDeployment resolves the deployment and API version for model. An
// alias match wins, then an explicit deployment_id, then the default
// entry; with a deployments list and none of these, it is a 400 naming the
// aliases the client may use.
func pickDeployment(model string, s *providers.Settings) (dep, version string, aliased bool, err error) {
	if len(s.Deployments) == 0 || s.DeploymentID != "" && !hasAlias(s.Deployments, model) {
		return s.DeploymentID, s.APIVersion, false, nil
	}
	pick := func(d providers.Deployment) (string, string) {
		v := d.APIVersion
		if v == "" {
			v = s.APIVersion
		}
		return d.DeploymentID, v
	}
	for _, d := range s.Deployments {
		if d.Alias == model {
			dep, version = pick(d)
			return dep, version, true, nil
		}
	}
	for _, d := range s.Deployments {
		if d.IsDefault {
			dep, version = pick(d)
			return dep, version, false, nil
		}
	}
	aliases := make([]string, 0, len(s.Deployments))
	for _, d := range s.Deployments {
		aliases = append(aliases, d.Alias)
	}
	sort.Strings(aliases)
	return "", "", false, apierror.BadRequest("model",
		"model %q matches no deployment alias (known aliases: %s) and no deployment is marked is_default", model, strings.Join(aliases, ", ")).WithCode("unknown_deployment")
}

func hasAlias(list []providers.Deployment, model string) bool {
	for _, d := range list {
		if d.Alias == model {
			return true
		}
	}
	return false
}

// deploymentScoped reports the operations Azure serves under
// /openai/deployments/{deployment}.
func deploymentScoped(op providers.Operation) bool {
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpImages,
		providers.OpSpeech, providers.OpTranscriptions, providers.OpTranslations:
		return true
	}
	return false
}

// isV1 reports Azure's version-less API.
func isV1(version string) bool {
	switch version {
	case "v1", "preview", "latest":
		return true
	}
	return false
}

// streamUsage reports whether the API version accepts
// stream_options.include_usage (introduced with 2024-09-01-preview);
// older versions reject the unknown field.
func streamUsage(version string) bool {
	if isV1(version) {
		return true
	}
	return len(version) >= 10 && version[:10] >= "2024-09-01"
}

func queryVersion(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	return q.Get("api-version")
}
