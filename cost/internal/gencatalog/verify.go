package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
)

func sortedKeys(entries map[string]entry) []string {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// slugs maps each LiteLLM provider name the generator writes to the
// gateway slug it must resolve to.
func slugs() map[string]string {
	m := map[string]string{}
	for _, ts := range providerTargets {
		for _, t := range ts {
			m[t.LiteLLM] = t.Slug
		}
	}
	return m
}

// verify parses data as the gateway will and checks that every entry is
// found under its provider and name with the prices written.
func verify(data []byte, entries map[string]entry) error {
	c, err := cost.Parse(data)
	if err != nil {
		return fmt.Errorf("generated file does not parse: %w", err)
	}
	bySlug := slugs()
	for _, k := range sortedKeys(entries) {
		e := entries[k]
		name := strings.TrimPrefix(k, e.Provider+"/")
		p, ok := c.Price(bySlug[e.Provider], name)
		if !ok {
			return fmt.Errorf("%s: not found as %s %q", k, bySlug[e.Provider], name)
		}
		for _, f := range e.Prices {
			want, _ := strconv.ParseFloat(f[1], 64)
			var got float64
			switch f[0] {
			case "input_cost_per_token":
				got = p.Input
			case "output_cost_per_token":
				got = p.Output
			case "cache_read_input_token_cost":
				got = p.CachedInput
			case "cache_creation_input_token_cost":
				got = p.CacheWrite
			case "output_cost_per_reasoning_token":
				got = p.Reasoning
			}
			if got != want {
				return fmt.Errorf("%s: %s reads back as %v, not %v", k, f[0], got, want)
			}
		}
	}
	return nil
}
