package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// fixture is a cut of the database's shape: match rules of every kind,
// tiered prices, dated and time-of-day variants, a "regional." Bedrock
// entry and a model priced only per image.
const fixture = `[
 {"id": "anthropic", "pricing_urls": ["https://www.anthropic.com/pricing#api"], "models": [
  {"id": "claude-sonnet-4-5", "match": {"or": [{"starts_with": "claude-sonnet-4-5"}, {"starts_with": "claude-sonnet-4.5"}]},
   "prices": {"input_mtok": {"base": 3, "tiers": [{"start": 200000, "price": 6}]}, "cache_write_mtok": 3.75, "cache_read_mtok": 0.3, "output_mtok": 15, "cache_write_1h_mtok": 6}},
  {"id": "claude-3-opus-latest", "match": {"starts_with": "claude-3-opus"}, "prices": {"input_mtok": 15, "output_mtok": 75}},
  {"id": "claude-old", "match": {"or": [{"equals": "claude-sonnet-4-5"}, {"contains": "claude-opus-4@"}]}, "prices": {"input_mtok": 99, "output_mtok": 99}}
 ]},
 {"id": "deepseek", "pricing_urls": [], "models": [
  {"id": "deepseek-chat", "match": {"equals": "deepseek-chat"}, "prices": [
   {"prices": {"input_mtok": 0.135, "output_mtok": 0.55}},
   {"constraint": {"type": "time_of_date", "start_time": "00:30:00Z", "end_time": "16:30:00Z"}, "prices": {"input_mtok": 0.27, "output_mtok": 1.1}}]},
  {"id": "deepseek-v4", "match": {"starts_with": "deepseek-v4"}, "prices": [
   {"prices": {"input_mtok": 0.14, "output_mtok": 0.28}},
   {"constraint": {"type": "start_date", "start_date": "2026-08-17"}, "prices": {"input_mtok": 0.22, "output_mtok": 0.66}},
   {"constraint": {"type": "start_date", "start_date": "2099-01-01"}, "prices": {"input_mtok": 9, "output_mtok": 9}}]}
 ]},
 {"id": "aws", "models": [
  {"id": "regional.anthropic.claude-sonnet-4-5-20250929-v1:0", "match": {"or": [{"starts_with": "anthropic.claude-sonnet-4-5-20250929"}, {"regex": "^x$"}]},
   "prices": {"input_mtok": 3.3, "output_mtok": 16.5}},
  {"id": "amazon.nova-canvas-v1:0", "match": {"equals": "amazon.nova-canvas-v1:0"}, "prices": {"output_image_mtok": 40}}
 ]},
 {"id": "google", "models": [
  {"id": "gemini-2.5-flash", "match": {"and": [{"starts_with": "gemini-2.5-flash"}, {"regex": "^(?!.*-tts)"}]}, "prices": {"input_mtok": 0.3, "cache_read_mtok": 0.03, "output_mtok": 2.5}}
 ]}
]`

func TestConvert(t *testing.T) {
	var ps []dbProvider
	if err := json.Unmarshal([]byte(fixture), &ps); err != nil {
		t.Fatal(err)
	}
	got, err := convert(ps, "2026-11-26")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		want string // rendered prices; "" means absent
	}{
		// Tiered prices at the base tier; 1h writes left out.
		{"anthropic/claude-sonnet-4-5", "input_cost_per_token=3e-06 output_cost_per_token=1.5e-05 cache_read_input_token_cost=3e-07 cache_creation_input_token_cost=3.75e-06"},
		// A model's id wins over another model's rule naming it.
		{"anthropic/claude-3-opus", "input_cost_per_token=1.5e-05 output_cost_per_token=7.5e-05"},
		{"anthropic/claude-3-opus-latest", "input_cost_per_token=1.5e-05 output_cost_per_token=7.5e-05"},
		{"anthropic/claude-sonnet-4.5", "input_cost_per_token=3e-06 output_cost_per_token=1.5e-05 cache_read_input_token_cost=3e-07 cache_creation_input_token_cost=3.75e-06"},
		{"anthropic/claude-opus-4@", ""}, // a fragment, not a name
		// Peak-hours price over the off-peak default.
		{"deepseek/deepseek-chat", "input_cost_per_token=2.7e-07 output_cost_per_token=1.1e-06"},
		// The latest dated price started by as-of, not a future one.
		{"deepseek/deepseek-v4", "input_cost_per_token=2.2e-07 output_cost_per_token=6.6e-07"},
		{"bedrock/regional.anthropic.claude-sonnet-4-5-20250929-v1:0", "input_cost_per_token=3.3e-06 output_cost_per_token=1.65e-05"},
		{"bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", "input_cost_per_token=3.3e-06 output_cost_per_token=1.65e-05"},
		{"bedrock/anthropic.claude-sonnet-4-5-20250929", "input_cost_per_token=3.3e-06 output_cost_per_token=1.65e-05"},
		{"bedrock/amazon.nova-canvas-v1:0", ""}, // no token price
		{"gemini/gemini-2.5-flash", "input_cost_per_token=3e-07 output_cost_per_token=2.5e-06 cache_read_input_token_cost=3e-08"},
		{"vertex_ai/gemini-2.5-flash", "input_cost_per_token=3e-07 output_cost_per_token=2.5e-06 cache_read_input_token_cost=3e-08"},
	}
	for _, tt := range tests {
		e, ok := got[tt.key]
		var s []string
		for _, p := range e.Prices {
			s = append(s, p[0]+"="+p[1])
		}
		if have := strings.Join(s, " "); have != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: %q (present %v); want %q", tt.key, have, ok, tt.want)
		}
	}
	if e := got["deepseek/deepseek-chat"]; e.Source != "https://github.com/pydantic/genai-prices" || e.AsOf != "2026-11-26" {
		t.Errorf("source/as_of of a provider without pricing URLs: %q %q", e.Source, e.AsOf)
	}

	// The rendered file parses as the gateway reads it and records the
	// database version.
	data := render(got, "0.1.8", "2026-11-26")
	if err := verify(data, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"_source": "@pydantic/genai-prices@0.1.8 (npm)`) {
		t.Errorf("version not recorded:\n%s", data[:300])
	}

	if _, err := convert([]dbProvider{{ID: "novita"}}, "2026-11-26"); err == nil {
		t.Error("a provider the gateway does not price was accepted")
	}
}

func TestPerToken(t *testing.T) {
	for in, want := range map[string]string{"0.3": "3e-07", "3.75": "3.75e-06", "0.00875": "8.75e-09", "0": "0", "2e5": "0.2"} {
		if got, err := perToken(in); err != nil || got != want {
			t.Errorf("perToken(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := perToken("-1"); err == nil {
		t.Error("negative price accepted")
	}
}
