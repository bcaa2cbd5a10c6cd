package app

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestBudgetsLeaseOption: budgets { lease } takes a duration of at least
// a second.
func TestBudgetsLeaseOption(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n budgets {\n lease 90s\n }\n}")); err != nil {
		t.Fatal(err)
	}
	if a.Budgets == nil || time.Duration(a.Budgets.Lease) != 90*time.Second {
		t.Errorf("budgets %+v", a.Budgets)
	}
	for _, bad := range []string{"lease", "lease 500ms", "lease -1m", "lease soon", "lease 1m 2m"} {
		if err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n budgets {\n " + bad + "\n }\n}")); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
