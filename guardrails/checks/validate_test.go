package checks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// TestValidateRequiredParams: every check with required parameters
// refuses, when its config compiles, a config missing one or giving it
// the wrong type, naming the parameter; the minimal valid parameters
// compile. Before, such a check compiled and then errored (so passed) on
// every request.
func TestValidateRequiredParams(t *testing.T) {
	cases := []struct {
		check, valid string
		bad          map[string]string // params → the parameter the error names
	}{
		{"regexMatch", `{"rule":"x"}`, map[string]string{`{}`: "rule", `{"rule":""}`: "rule", `{"rule":3}`: "rule"}},
		{"regexReplace", `{"rule":"/x/g"}`, map[string]string{`{"redactText":"-"}`: "rule"}},
		{"sentenceCount", `{"minSentences":0,"maxSentences":2}`, map[string]string{`{"minSentences":1}`: "maxSentences", `{"minSentences":"1","maxSentences":3}`: "minSentences"}},
		{"wordCount", `{"minWords":1,"maxWords":5}`, map[string]string{`{"minWords":1}`: "maxWords", `{"maxWords":5}`: "minWords", `{"minWords":1.5,"maxWords":5}`: "minWords"}},
		{"characterCount", `{"minCharacters":0,"maxCharacters":9}`, map[string]string{`{"minCharacters":0}`: "maxCharacters", `{"minCharacters":0,"maxCharacters":2.5}`: "maxCharacters"}},
		{"jsonSchema", `{"schema":{"type":"object"}}`, map[string]string{`{}`: "schema", `{"schema":"object"}`: "schema"}},
		{"jsonKeys", `{"keys":["a"],"operator":"any"}`, map[string]string{`{"operator":"any"}`: "keys", `{"keys":[],"operator":"any"}`: "keys", `{"keys":["a"]}`: "operator", `{"keys":["a"],"operator":"some"}`: "operator"}},
		{"contains", `{"words":["a"],"operator":"none"}`, map[string]string{`{"operator":"any"}`: "words", `{"words":["a"]}`: "operator", `{"words":"a","operator":"any"}`: "words"}},
		{"webhook", `{"webhookURL":"https://hooks.example.com/x"}`, map[string]string{`{}`: "webhookURL", `{"webhookURL":"ftp://x"}`: "webhookURL", `{"webhookURL":"https://h/x","headers":"[1]"}`: "headers", `{"webhookURL":"https://h/x","timeout":"5s"}`: "timeout"}},
		{"log", `{"logURL":"https://logs.example.com/x"}`, map[string]string{`{}`: "logURL"}},
		{"containsCode", `{"format":"Python"}`, map[string]string{`{}`: "format"}},
		{"endsWith", `{"suffix":"!"}`, map[string]string{`{}`: "suffix", `{"suffix":""}`: "suffix"}},
		{"modelWhitelist", `{"models":["gpt-4o"]}`, map[string]string{`{}`: "models", `{"models":"gpt-4o"}`: "models"}},
		{"modelRules", `{"rules":{"defaults":["gpt-4o"]}}`, map[string]string{`{}`: "rules", `{"rules":{}}`: "rules", `{"rules":{"metadata":{"team":{"a":"gpt-4o"}}}}`: "rules.metadata.team.a"}},
		{"requiredMetadataKeys", `{"metadataKeys":["team"],"operator":"all"}`, map[string]string{`{"operator":"all"}`: "metadataKeys", `{"metadataKeys":["team"]}`: "operator"}},
		{"addPrefix", `{"prefix":"Be brief. "}`, map[string]string{`{}`: "prefix", `{"prefix":1}`: "prefix"}},
		{"allowedRequestTypes", `{}`, map[string]string{`{"allowedTypes":3}`: "allowedTypes", `{"allowedTypes":["embed"],"blockedTypes":"embed"}`: "embed"}},
		// Checks without required parameters compile with none.
		{"validUrls", `{}`, nil},
		{"alluppercase", `{}`, nil},
		{"alllowercase", `{}`, nil},
		{"notNull", `{}`, nil},
	}
	compile := func(check, params string) error {
		_, err := guardrails.Compile(json.RawMessage(`{"checks":[{"id":"default.`+check+`","parameters":`+params+`}]}`), "h", nil)
		return err
	}
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			if err := compile(tc.check, tc.valid); err != nil {
				t.Fatalf("valid parameters %s refused: %v", tc.valid, err)
			}
			for params, name := range tc.bad {
				err := compile(tc.check, params)
				if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
					t.Errorf("parameters %s: error %v, want one naming %q", params, err, name)
				}
				if err != nil && strings.Contains(err.Error(), "hooks.example.com") {
					t.Errorf("the error quotes the URL: %v", err)
				}
			}
		})
	}
}
