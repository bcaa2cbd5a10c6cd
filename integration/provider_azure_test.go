package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// azureSite loads a Caddyfile with a virtual key for the fake Azure
// resource and its deployments list.
func azureSite(t *testing.T, up *fakeAzure) {
	t.Helper()
	loadFresh(t, site{LLM: fmt.Sprintf(`virtual_key azure-test {
			provider azure-openai
			api_key %s
			resource_name contoso
			custom_host %s
			deployment dep-mini gpt-4o-mini 2024-08-01-preview
			deployment emb-small text-embedding-3-small 2024-10-21
			deployment dep-main gpt-4o 2024-10-21 default
		}`, azureKey, up.URL)})
}

func TestAzureChat(t *testing.T) {
	up := newFakeAzure(t)
	azureSite(t, up)
	client := newClient("x-gateway-virtual-key", "azure-test")
	resp, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello from Azure!" || resp.Usage.TotalTokens != 13 {
		t.Fatalf("response %s", resp.RawJSON())
	}
	if !strings.Contains(resp.RawJSON(), `"prompt_filter_results"`) {
		t.Fatal("Azure's own fields must pass through")
	}
	seen := up.last()
	if seen.Path != "/openai/deployments/dep-mini/chat/completions" || seen.Query != "api-version=2024-08-01-preview" {
		t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
	}
	if seen.Header.Get("api-key") != azureKey || seen.Header.Get("Authorization") != "" {
		t.Fatalf("auth api-key=%q authorization=%q", seen.Header.Get("api-key"), seen.Header.Get("Authorization"))
	}
	if !strings.Contains(string(seen.Body), `"model":"gpt-4o-mini"`) {
		t.Fatalf("body %s", seen.Body)
	}
}

func TestAzureChatStream(t *testing.T) {
	up := newFakeAzure(t)
	azureSite(t, up)
	client := newClient("x-gateway-virtual-key", "azure-test")
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", includeUsage), func(t *testing.T) {
			truncateLog()
			params := chatParams("gpt-4o") // the default deployment, api-version 2024-10-21
			if includeUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			traceID := fmt.Sprintf("azure-stream-%v", includeUsage)
			stream := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithHeader("x-gateway-trace-id", traceID))
			var acc openai.ChatCompletionAccumulator
			var sawUsage bool
			for stream.Next() {
				c := stream.Current()
				acc.AddChunk(c)
				sawUsage = sawUsage || c.Usage.TotalTokens > 0
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if got := acc.Choices[0].Message.Content; got != "Hi from Azure" || acc.Choices[0].FinishReason != "stop" {
				t.Fatalf("content %q finish %q", got, acc.Choices[0].FinishReason)
			}
			if sawUsage != includeUsage {
				t.Fatalf("usage chunk reached the client: %v, asked for: %v", sawUsage, includeUsage)
			}
			seen := up.last()
			if seen.Path != "/openai/deployments/dep-main/chat/completions" || !strings.Contains(string(seen.Body), `"include_usage":true`) {
				t.Fatalf("upstream %s body %s", seen.Path, seen.Body)
			}
			if line := awaitLogLine(t, traceID); !strings.Contains(line, `"total_tokens":12`) {
				t.Fatalf("log lacks the stream's usage: %s", line)
			}
		})
	}
}

func TestAzureEmbeddings(t *testing.T) {
	up := newFakeAzure(t)
	azureSite(t, up)
	client := newClient("x-gateway-virtual-key", "azure-test")
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 1 || len(resp.Data[0].Embedding) != 3 {
		t.Fatalf("embeddings %+v", resp.Data)
	}
	if seen := up.last(); seen.Path != "/openai/deployments/emb-small/embeddings" || seen.Query != "api-version=2024-10-21" {
		t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
	}
}

// TestAzureHeaders: everything from request headers, the key from the
// client's Authorization (sent on as api-key), the model from the
// model-name header.
func TestAzureHeaders(t *testing.T) {
	up := newFakeAzure(t)
	loadFresh(t, site{})
	tests := []struct {
		name, key  string
		wantHeader string // header carrying the credential upstream
		wantValue  string
	}{
		{"resource key", azureKey, "api-key", azureKey},
		{"entra token", azureEntraToken, "Authorization", "Bearer " + azureEntraToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(
				"Authorization", "Bearer "+tt.key,
				"x-gateway-provider", "azure-openai",
				"x-gateway-custom-host", up.URL,
				"x-gateway-cloudb-resource-name", "contoso",
				"x-gateway-cloudb-deployment-id", "dep-main",
				"x-gateway-cloudb-api-version", "2024-02-01",
				"x-gateway-cloudb-model-name", "gpt-4o-2024-08-06",
			)
			if _, err := client.Chat.Completions.New(context.Background(), chatParams("my-alias")); err != nil {
				t.Fatal(err)
			}
			seen := up.last()
			if seen.Path != "/openai/deployments/dep-main/chat/completions" || seen.Query != "api-version=2024-02-01" {
				t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
			}
			if got := seen.Header.Get(tt.wantHeader); got != tt.wantValue {
				t.Fatalf("%s = %q", tt.wantHeader, got)
			}
			if tt.wantHeader == "api-key" && seen.Header.Get("Authorization") != "" {
				t.Fatal("the resource key must not also travel as Authorization")
			}
			if !strings.Contains(string(seen.Body), `"model":"gpt-4o-2024-08-06"`) {
				t.Fatalf("model-name not applied: %s", seen.Body)
			}
		})
	}
}

func TestAzureV1API(t *testing.T) {
	up := newFakeAzure(t)
	loadFresh(t, site{})
	cfg := fmt.Sprintf(`{"provider":"azure-openai","api_key":%q,"resource_name":"contoso","api_version":"v1","custom_host":%q}`, azureKey, up.URL)
	client := newClient("x-gateway-config", cfg)
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("dep-mini")); err != nil {
		t.Fatal(err)
	}
	if seen := up.last(); seen.Path != "/openai/v1/chat/completions" || seen.Query != "" {
		t.Fatalf("upstream %s?%s", seen.Path, seen.Query)
	}
}

func TestAzureErrors(t *testing.T) {
	up := newFakeAzure(t)
	azureSite(t, up)
	noDefault := fmt.Sprintf(`{"provider":"azure-openai","api_key":%q,"resource_name":"contoso","custom_host":%q,`+
		`"deployments":[{"deployment_id":"dep-mini","alias":"small","api_version":"2024-10-21"},{"deployment_id":"dep-main","alias":"big","api_version":"2024-10-21"}]}`, azureKey, up.URL)
	wrongKey := fmt.Sprintf(`{"provider":"azure-openai","api_key":"ffffffffffffffffffffffffffffffff","resource_name":"contoso","deployment_id":"dep-main","api_version":"2024-10-21","custom_host":%q}`, up.URL)
	goneDeployment := fmt.Sprintf(`{"provider":"azure-openai","api_key":%q,"resource_name":"contoso","deployment_id":"dep-deleted","api_version":"2024-10-21","custom_host":%q}`, azureKey, up.URL)
	tests := []struct {
		name          string
		headers       []string
		wantStatus    int
		wantGateway   bool // the gateway's own error (x-gateway-error)
		wantParam     string
		wantInMessage string
	}{
		{"unknown alias", []string{"x-gateway-config", noDefault}, 400, true, "model", "known aliases: big, small"},
		{"no resource", []string{"x-gateway-provider", "azure-openai", "x-gateway-cloudb-deployment-id", "d", "x-gateway-cloudb-api-version", "2024-10-21"}, 400, true, "resource_name", "resource_name"},
		{"no deployment", []string{"x-gateway-provider", "azure-openai", "x-gateway-custom-host", up.URL, "x-gateway-cloudb-api-version", "2024-10-21"}, 400, true, "deployment_id", "deployment_id"},
		{"wrong key", []string{"x-gateway-config", wrongKey}, 401, false, "", "Access denied due to invalid subscription key"},
		{"deleted deployment", []string{"x-gateway-config", goneDeployment}, 404, false, "", "The API deployment for this resource does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient(tt.headers...)
			_, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o"))
			var apiErr *openai.Error
			if !asOpenAIError(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
				t.Fatalf("err = %v", err)
			}
			if (apiErr.Response.Header.Get("x-gateway-error") == "true") != tt.wantGateway {
				t.Fatalf("x-gateway-error = %q", apiErr.Response.Header.Get("x-gateway-error"))
			}
			if tt.wantParam != "" && apiErr.Param != tt.wantParam {
				t.Fatalf("param %q", apiErr.Param)
			}
			if !strings.Contains(apiErr.Message, tt.wantInMessage) {
				t.Fatalf("message %q", apiErr.Message)
			}
		})
	}
}

func TestAzureAI(t *testing.T) {
	up := newFakeAzure(t)
	loadFresh(t, site{})
	tests := []struct {
		name, cfg      string
		wantQuery      string
		wantDeployment string
	}{
		{"serverless", `{"provider":"azure-ai","api_key":%q,"cloudb_deployment_type":"serverless","cloudb_endpoint_name":"Llama-3-8B-xyz","cloudb_region":"eastus2","cloudb_api_version":"2024-05-01-preview","custom_host":%q}`,
			"api-version=2024-05-01-preview", ""},
		{"managed", `{"provider":"azure-ai","api_key":%q,"cloudb_deployment_type":"managed","cloudb_endpoint_name":"my-endpoint","cloudb_deployment_name":"blue","cloudb_region":"westus3","custom_host":%q}`,
			"", "blue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := newClient("x-gateway-config", fmt.Sprintf(tt.cfg, azureKey, up.URL))
			resp, err := client.Chat.Completions.New(context.Background(), chatParams("Llama-3-8B"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content != "Hello from Azure!" {
				t.Fatalf("content %q", resp.Choices[0].Message.Content)
			}
			seen := up.last()
			if seen.Path != "/v1/chat/completions" || seen.Query != tt.wantQuery || seen.Header.Get("Authorization") != "Bearer "+azureKey ||
				seen.Header.Get("azureml-model-deployment") != tt.wantDeployment {
				t.Fatalf("upstream %s?%s auth=%q deployment=%q", seen.Path, seen.Query, seen.Header.Get("Authorization"), seen.Header.Get("azureml-model-deployment"))
			}

			stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("Llama-3-8B"))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "Hi from Azure" {
				t.Fatalf("stream err=%v content=%+v", err, acc.Choices)
			}
		})
	}
}
