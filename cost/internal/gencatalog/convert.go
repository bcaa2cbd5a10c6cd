package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// dbProvider is a provider of the genai-prices database, as its public
// API (findProvider) returns it. Only the fields the catalog uses are
// declared.
type dbProvider struct {
	ID          string    `json:"id"`
	PricingURLs []string  `json:"pricing_urls"`
	Models      []dbModel `json:"models"`
}

// dbModel is one model: its id, the rule that matches the names callers
// use for it, and its prices (one set, or a list of sets each with a
// constraint).
type dbModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

// target says which gateway provider slugs a database provider prices and
// under which LiteLLM provider name (the key prefix and litellm_provider
// the cost package maps back to that slug).
type target struct {
	Slug    string
	LiteLLM string
}

// providerTargets maps the database's provider ids to the gateway's
// providers. Google's entries price both the Gemini API and Vertex AI
// (Gemini and partner models on Vertex share its list). Providers the
// gateway has no adapter for are left out, which keeps the catalog small.
var providerTargets = map[string][]target{
	"openai":     {{"openai", "openai"}},
	"azure":      {{"azure-openai", "azure"}},
	"anthropic":  {{"anthropic", "anthropic"}},
	"google":     {{"google", "gemini"}, {"vertex-ai", "vertex_ai"}},
	"aws":        {{"bedrock", "bedrock"}},
	"cohere":     {{"cohere", "cohere"}},
	"mistral":    {{"mistral-ai", "mistral"}},
	"groq":       {{"groq", "groq"}},
	"deepseek":   {{"deepseek", "deepseek"}},
	"together":   {{"together-ai", "together_ai"}},
	"fireworks":  {{"fireworks-ai", "fireworks_ai"}},
	"openrouter": {{"openrouter", "openrouter"}},
	"perplexity": {{"perplexity-ai", "perplexity"}},
	"x-ai":       {{"x-ai", "xai"}},
	"cerebras":   {{"cerebras", "cerebras"}},
}

// providerIDs returns the database providers to read, sorted.
func providerIDs() []string {
	ids := make([]string, 0, len(providerTargets))
	for id := range providerTargets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// priceFields maps the database's per-million-token price names to the
// LiteLLM per-token fields the cost package reads. Other units (audio,
// images, searches, one-hour cache writes, per-request fees) have no
// place in the gateway's usage and are left out.
var priceFields = []struct{ db, litellm string }{
	{"input_mtok", "input_cost_per_token"},
	{"output_mtok", "output_cost_per_token"},
	{"cache_read_mtok", "cache_read_input_token_cost"},
	{"cache_write_mtok", "cache_creation_input_token_cost"},
	{"output_reasoning_mtok", "output_cost_per_reasoning_token"},
}

// entry is one model of the generated file, in LiteLLM's format; the
// prices are decimal strings so that the file shows 3e-06, not the
// nearest binary fraction's long expansion.
type entry struct {
	Provider string
	Prices   [][2]string // LiteLLM field, value, in priceFields order
	Source   string
	AsOf     string
}

// nameRE is what a literal of a match rule must look like to be a model
// name on its own: rules also hold fragments ("gpt-4o-mini-2024-07-18.ft-",
// "claude-opus-4@") that only make sense as prefixes.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*[A-Za-z0-9]$`)

// convert turns the database's providers into catalog entries keyed
// "<litellm provider>/<model name>". asOf (YYYY-MM-DD) picks, among a
// model's dated prices, the one in force that day.
func convert(providers []dbProvider, asOf string) (map[string]entry, error) {
	out := map[string]entry{}
	for _, p := range providers {
		targets, ok := providerTargets[p.ID]
		if !ok {
			return nil, fmt.Errorf("provider %q is not one the gateway prices", p.ID)
		}
		source := "https://github.com/pydantic/genai-prices"
		if len(p.PricingURLs) > 0 && strings.HasPrefix(p.PricingURLs[0], "https://") {
			source = p.PricingURLs[0]
		}
		// Names are claimed in two passes: every model's own id first,
		// then the names its match rule spells out, so that a rule
		// naming another model's id (or an older family's prefix) cannot
		// take that id's price. Within a pass the database's order wins,
		// as its matcher's first match does.
		type priced struct {
			own, names []string
			prices     [][2]string
		}
		var models []priced
		for _, m := range p.Models {
			prices, err := currentPrices(m.Prices, asOf)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", p.ID, m.ID, err)
			}
			if !hasTokenPrice(prices) {
				continue
			}
			var names []string
			if err := literals(m.Match, &names); err != nil {
				return nil, fmt.Errorf("%s/%s: match: %w", p.ID, m.ID, err)
			}
			models = append(models, priced{own: ownNames(m.ID), names: names, prices: prices})
		}
		for _, t := range targets {
			claim := func(name string, prices [][2]string) {
				if !nameRE.MatchString(name) {
					return
				}
				key := t.LiteLLM + "/" + name
				if _, taken := out[key]; taken {
					return
				}
				out[key] = entry{Provider: t.LiteLLM, Prices: prices, Source: source, AsOf: asOf}
			}
			for _, m := range models {
				for _, n := range m.own {
					claim(n, m.prices)
				}
			}
			for _, m := range models {
				for _, n := range m.names {
					claim(n, m.prices)
				}
			}
		}
	}
	return out, nil
}

// ownNames returns the names a model's id stands for: the id itself and,
// for the database's "regional." Bedrock entries (in-region and
// geography cross-region prices), the in-region model id without that
// marker, which is what a caller sends.
func ownNames(id string) []string {
	if rest, ok := strings.CutPrefix(id, "regional."); ok {
		return []string{id, rest}
	}
	return []string{id}
}

// literals appends the strings of a match rule's equals, starts_with,
// ends_with and contains clauses, walking and/or; regular expressions
// name no single model and are skipped.
func literals(raw json.RawMessage, out *[]string) error {
	if len(raw) == 0 {
		return nil
	}
	var rule map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rule); err != nil {
		return err
	}
	for _, k := range []string{"equals", "starts_with", "ends_with", "contains"} {
		if v, ok := rule[k]; ok {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			*out = append(*out, s)
		}
	}
	for _, k := range []string{"or", "and"} {
		if v, ok := rule[k]; ok {
			var subs []json.RawMessage
			if err := json.Unmarshal(v, &subs); err != nil {
				return err
			}
			for _, s := range subs {
				if err := literals(s, out); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// currentPrices returns a model's token prices in force on asOf as
// (LiteLLM field, per-token decimal) pairs. A list of prices holds an
// unconstrained default, dated variants and time-of-day variants: the
// latest dated variant started by asOf replaces the default, and a
// time-of-day variant dearer than that (a peak-hours price) replaces it
// in turn, since the catalog holds one price per model and a budget must
// not be under-charged. A tiered price (long prompts cost more) is read
// at its base tier.
func currentPrices(raw json.RawMessage, asOf string) ([][2]string, error) {
	var set map[string]json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		var list []struct {
			Constraint *struct {
				Type      string `json:"type"`
				StartDate string `json:"start_date"`
			} `json:"constraint"`
			Prices map[string]json.RawMessage `json:"prices"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		best := ""
		for _, c := range list {
			switch {
			case c.Constraint == nil:
				if best == "" {
					set = c.Prices
				}
			case c.Constraint.Type == "start_date" && c.Constraint.StartDate <= asOf && c.Constraint.StartDate > best:
				best, set = c.Constraint.StartDate, c.Prices
			}
		}
		for _, c := range list {
			if c.Constraint != nil && c.Constraint.Type == "time_of_date" && dearer(c.Prices, set) {
				set = c.Prices
			}
		}
	} else if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	var out [][2]string
	for _, f := range priceFields {
		v, ok := set[f.db]
		if !ok {
			continue
		}
		mtok, err := baseNumber(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.db, err)
		}
		perToken, err := perToken(mtok)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.db, err)
		}
		out = append(out, [2]string{f.litellm, perToken})
	}
	return out, nil
}

// baseNumber reads a price: a number, or a tiered price's base.
func baseNumber(v json.RawMessage) (string, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		return n.String(), nil
	}
	var tiered struct {
		Base *json.Number `json:"base"`
	}
	if err := json.Unmarshal(v, &tiered); err != nil || tiered.Base == nil {
		return "", fmt.Errorf("price %s is neither a number nor a tiered price", v)
	}
	return tiered.Base.String(), nil
}

// perToken converts a per-million-token price to the per-token decimal
// closest to it (exactly: 0.3 per million is 3e-07, not 2.9999999999999997e-07).
func perToken(mtok string) (string, error) {
	r, ok := new(big.Rat).SetString(mtok)
	if !ok || r.Sign() < 0 {
		return "", fmt.Errorf("price %q is not a non-negative number", mtok)
	}
	f, _ := r.Quo(r, big.NewRat(1_000_000, 1)).Float64()
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

func hasTokenPrice(prices [][2]string) bool {
	for _, p := range prices {
		if p[0] == "input_cost_per_token" || p[0] == "output_cost_per_token" {
			return true
		}
	}
	return false
}

// dearer reports whether price set a costs more than b: by input price,
// then output price.
func dearer(a, b map[string]json.RawMessage) bool {
	num := func(set map[string]json.RawMessage, k string) float64 {
		v, ok := set[k]
		if !ok {
			return 0
		}
		s, err := baseNumber(v)
		if err != nil {
			return 0
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f
	}
	if ai, bi := num(a, "input_mtok"), num(b, "input_mtok"); ai != bi {
		return ai > bi
	}
	return num(a, "output_mtok") > num(b, "output_mtok")
}
