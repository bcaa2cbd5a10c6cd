package cost

import "testing"

func TestCatalogModels(t *testing.T) {
	names := map[string]bool{}
	for _, m := range Builtin().Models() {
		if names[m] {
			t.Fatalf("%q listed twice", m)
		}
		names[m] = true
	}
	for _, m := range []string{"gpt-4o-mini", "o4-mini"} {
		if !names[m] {
			t.Errorf("%q missing from %d names", m, len(names))
		}
	}
	if (*Catalog)(nil).Models() != nil {
		t.Error("a nil catalog names models")
	}
}
