package keys

import (
	"slices"
	"strings"
	"testing"
)

// TestChangedFieldsNamesNoValue compares records member by member: it
// names what changed (a new record: what it was given), treats null, an
// absent member and an empty list alike, and returns no value.
func TestChangedFieldsNamesNoValue(t *testing.T) {
	type rec struct {
		Name   *string  `json:"name"`
		Limit  float64  `json:"limit"`
		Tags   []string `json:"tags"`
		Secret string   `json:"secret,omitempty"`
	}
	name, other := "n-1", "n-2"
	fields := []string{"name", "limit", "tags", "secret"}
	for _, tc := range []struct {
		label         string
		before, after rec
		want          []string
	}{
		{"new record", rec{}, rec{Name: &name, Limit: 61.25, Secret: "s3cret"}, []string{"name", "limit", "secret"}},
		{"one member", rec{Name: &name, Limit: 1}, rec{Name: &name, Limit: 2}, []string{"limit"}},
		{"cleared name", rec{Name: &name}, rec{}, []string{"name"}},
		{"renamed", rec{Name: &name}, rec{Name: &other}, []string{"name"}},
		{"null and empty list alike", rec{Tags: nil}, rec{Tags: []string{}}, []string{}},
		{"list changed", rec{Tags: []string{"a"}}, rec{Tags: []string{"b"}}, []string{"tags"}},
		{"nothing", rec{Limit: 3}, rec{Limit: 3}, []string{}},
	} {
		got := ChangedFields(tc.before, tc.after, fields...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.label, got, tc.want)
		}
		for _, f := range got {
			if !slices.Contains(fields, f) || strings.Contains(f, "s3cret") {
				t.Errorf("%s: %q is not a field name", tc.label, f)
			}
		}
	}
}
