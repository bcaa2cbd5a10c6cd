package jobs

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func metadata(n, keyLen, valLen int) string {
	parts := make([]string, n)
	for i := range parts {
		k := fmt.Sprintf("%0*d", keyLen, i)
		parts[i] = fmt.Sprintf("%q:%q", k, strings.Repeat("v", valLen))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestCheck(t *testing.T) {
	okBatch := `{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}`
	okFT := `{"model":"gpt-4o-mini","training_file":"file-1","suffix":"x","method":{"type":"supervised"}}`
	withBatch := func(extra string) string { return strings.TrimSuffix(okBatch, "}") + "," + extra + "}" }
	withFT := func(extra string) string { return strings.TrimSuffix(okFT, "}") + "," + extra + "}" }
	tests := []struct {
		name, method, path, query, body string
		param                           string // "" = valid
	}{
		{"batch ok", "POST", "/v1/batches", "", okBatch, ""},
		{"batch ok immediate", "POST", "/v1/batches", "", `{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":"immediate"}`, ""},
		{"batch ok without /v1", "POST", "/batches", "", okBatch, ""},
		{"batch not json", "POST", "/v1/batches", "", `{`, "-"},
		{"batch array", "POST", "/v1/batches", "", `[]`, "-"},
		{"batch empty body", "POST", "/v1/batches", "", ``, "-"},
		{"batch too deep", "POST", "/v1/batches", "", strings.Repeat("[", 200) + strings.Repeat("]", 200), "-"},
		{"batch missing input_file_id", "POST", "/v1/batches", "", `{"endpoint":"/v1/embeddings","completion_window":"24h"}`, "input_file_id"},
		{"batch input_file_id number", "POST", "/v1/batches", "", `{"input_file_id":1,"endpoint":"/v1/embeddings","completion_window":"24h"}`, "input_file_id"},
		{"batch missing endpoint", "POST", "/v1/batches", "", `{"input_file_id":"f","completion_window":"24h"}`, "endpoint"},
		{"batch bad endpoint", "POST", "/v1/batches", "", `{"input_file_id":"f","endpoint":"/v1/responses","completion_window":"24h"}`, "endpoint"},
		{"batch missing window", "POST", "/v1/batches", "", `{"input_file_id":"f","endpoint":"/v1/embeddings"}`, "completion_window"},
		{"batch bad window", "POST", "/v1/batches", "", `{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":"48h"}`, "completion_window"},
		{"batch metadata null", "POST", "/v1/batches", "", withBatch(`"metadata":null`), ""},
		{"batch metadata 16 pairs max size", "POST", "/v1/batches", "", withBatch(`"metadata":` + metadata(16, 64, 512)), ""},
		{"batch metadata 17 pairs", "POST", "/v1/batches", "", withBatch(`"metadata":` + metadata(17, 2, 1)), "metadata"},
		{"batch metadata long key", "POST", "/v1/batches", "", withBatch(`"metadata":` + metadata(1, 65, 1)), "metadata"},
		{"batch metadata long value", "POST", "/v1/batches", "", withBatch(`"metadata":` + metadata(1, 2, 513)), "metadata"},
		{"batch metadata non-string value", "POST", "/v1/batches", "", withBatch(`"metadata":{"a":1}`), "metadata"},
		{"batch metadata array", "POST", "/v1/batches", "", withBatch(`"metadata":[]`), "metadata"},
		{"batch list default", "GET", "/v1/batches", "", "", ""},
		{"batch list 1", "GET", "/v1/batches", "limit=1", "", ""},
		{"batch list 100", "GET", "/v1/batches", "limit=100", "", ""},
		{"batch list 0", "GET", "/v1/batches", "limit=0", "", "limit"},
		{"batch list 101", "GET", "/v1/batches", "limit=101", "", "limit"},
		{"batch list junk", "GET", "/v1/batches", "limit=abc", "", "limit"},
		{"ft ok", "POST", "/v1/fine_tuning/jobs", "", okFT, ""},
		{"ft missing model", "POST", "/v1/fine_tuning/jobs", "", `{"training_file":"f","suffix":"x","method":{"type":"supervised"}}`, "model"},
		{"ft missing training_file", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","suffix":"x","method":{"type":"supervised"}}`, "training_file"},
		{"ft missing suffix", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","method":{"type":"supervised"}}`, "suffix"},
		{"ft long suffix", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"` + strings.Repeat("s", 65) + `","method":{"type":"supervised"}}`, "suffix"},
		{"ft missing method", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x"}`, "method"},
		{"ft method not object", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":"supervised"}`, "method"},
		{"ft method bad type", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":{"type":"lora"}}`, "method.type"},
		{"ft hyper ok", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":{"type":"dpo","dpo":{"hyperparameters":{"beta":2,"n_epochs":"auto","batch_size":256}}}}`, ""},
		{"ft hyper n_epochs 51", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":{"type":"supervised","supervised":{"hyperparameters":{"n_epochs":51}}}}`, "method.supervised.hyperparameters.n_epochs"},
		{"ft hyper lr 0", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":{"type":"supervised","supervised":{"hyperparameters":{"learning_rate_multiplier":0}}}}`, "method.supervised.hyperparameters.learning_rate_multiplier"},
		{"ft reinforcement needs grader", "POST", "/v1/fine_tuning/jobs", "", `{"model":"m","training_file":"f","suffix":"x","method":{"type":"reinforcement"}}`, "method.reinforcement.grader"},
		{"ft legacy hyper batch 0", "POST", "/v1/fine_tuning/jobs", "", withFT(`"hyperparameters":{"batch_size":0}`), "hyperparameters.batch_size"},
		{"ft integrations 5", "POST", "/v1/fine_tuning/jobs", "", withFT(`"integrations":[{},{},{},{},{}]`), ""},
		{"ft integrations 6", "POST", "/v1/fine_tuning/jobs", "", withFT(`"integrations":[{},{},{},{},{},{}]`), "integrations"},
		{"ft integrations object", "POST", "/v1/fine_tuning/jobs", "", withFT(`"integrations":{}`), "integrations"},
		{"ft seed negative", "POST", "/v1/fine_tuning/jobs", "", withFT(`"seed":-1`), "seed"},
		{"ft metadata 17", "POST", "/v1/fine_tuning/jobs", "", withFT(`"metadata":` + metadata(17, 2, 1)), "metadata"},
		{"ft list default", "GET", "/v1/fine_tuning/jobs", "", "", ""},
		{"ft list 1000", "GET", "/v1/fine_tuning/jobs", "limit=1000", "", ""},
		{"ft list 0", "GET", "/v1/fine_tuning/jobs", "limit=0", "", "limit"},
		{"ft list -3", "GET", "/v1/fine_tuning/jobs", "limit=-3", "", "limit"},
		{"other path", "POST", "/v1/chat/completions", "", `{`, ""},
		{"batch retrieve not governed", "GET", "/v1/batches/batch_1", "limit=0", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			err := Check(tc.method, tc.path, q, []byte(tc.body))
			if tc.param == "" {
				if err != nil {
					t.Fatalf("want nil, got %v", err)
				}
				return
			}
			var ae *apierror.Error
			if !errors.As(err, &ae) {
				t.Fatalf("want *apierror.Error, got %v", err)
			}
			if ae.Status != http.StatusBadRequest {
				t.Fatalf("status %d", ae.Status)
			}
			if tc.param != "-" {
				if ae.Param != tc.param {
					t.Fatalf("param %v, want %s (%s)", ae.Param, tc.param, ae.Message)
				}
				if !strings.Contains(ae.Message, strings.TrimPrefix(tc.param[strings.LastIndex(tc.param, ".")+1:], "")) {
					t.Fatalf("message %q does not name %s", ae.Message, tc.param)
				}
			}
		})
	}
}

func TestListLimits(t *testing.T) {
	for _, tc := range []struct {
		q    string
		ft   bool
		want int
	}{{"", false, 20}, {"limit=7", false, 7}, {"", true, 20}, {"limit=500", true, 500}} {
		q, _ := url.ParseQuery(tc.q)
		f := BatchListLimit
		if tc.ft {
			f = FineTuningListLimit
		}
		if n, err := f(q); err != nil || n != tc.want {
			t.Errorf("%q ft=%v: %d %v, want %d", tc.q, tc.ft, n, err, tc.want)
		}
	}
}

func TestProviderCapabilities(t *testing.T) {
	for _, tc := range []struct {
		slug string
		want bool
	}{{"openai", true}, {"azure-openai", true}, {"vendor", true}, {"cloudb", true}, {"OpenAI", true},
		{"anthropic", false}, {"bedrock", false}, {"clouda", false}, {"vertex-ai", false}, {"groq", false}, {"", false}} {
		if ProviderHasBatchAPI(tc.slug) != tc.want || ProviderHasFilesAPI(tc.slug) != tc.want || ProviderHasFineTuning(tc.slug) != tc.want {
			t.Errorf("%q: want %v", tc.slug, tc.want)
		}
		err := CheckFineTuningProvider(tc.slug)
		if (err == nil) != tc.want {
			t.Errorf("%q: CheckFineTuningProvider %v", tc.slug, err)
		}
		if err != nil {
			ae := err.(*apierror.Error)
			if ae.Status != 400 || (tc.slug != "" && !strings.Contains(ae.Message, tc.slug)) {
				t.Errorf("%q: %d %q", tc.slug, ae.Status, ae.Message)
			}
		}
	}
}
