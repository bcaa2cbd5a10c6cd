package app

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestLiteralPasswordInLedgerURL(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"postgres://gw:s3cret@db:5432/llm", true},
		{"postgres://gw:{env.LEDGER_PASSWORD}@db:5432/llm", false},
		{"postgres://gw@db:5432/llm", false},
		{"/var/lib/caddy/ledger.db", false},
	} {
		if got := literalPassword(tc.dsn); got != tc.want {
			t.Errorf("literalPassword(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}

func TestLedgerAndBudgetsOptions(t *testing.T) {
	a := new(App)
	d := caddyfile.NewTestDispenser(`llm {
		ledger /var/lib/ledger.db {
			retention 30d
			queue 100
			spool /var/spool/llm 2GiB
		}
		budgets {
			alert_webhook https://hooks.example.com/x
			alert_allow loopback private
			max_wait 5s
		}
	}`)
	if err := a.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if a.Ledger == nil || a.Ledger.DSN != "/var/lib/ledger.db" || time.Duration(a.Ledger.Retention) != 30*24*time.Hour || a.Ledger.Queue != 100 ||
		a.Ledger.SpoolDir != "/var/spool/llm" || a.Ledger.SpoolMaxSize != 2<<30 {
		t.Errorf("ledger %+v", a.Ledger)
	}
	if b := a.Budgets; b == nil || b.AlertWebhook != "https://hooks.example.com/x" || len(b.AlertAllow) != 2 || time.Duration(b.MaxWait) != 5*time.Second {
		t.Errorf("budgets %+v", a.Budgets)
	}
	for _, bad := range []string{
		"llm {\n ledger a b\n}",
		"llm {\n ledger a {\n retention -1h\n }\n}",
		"llm {\n ledger a {\n queue 0\n }\n}",
		"llm {\n ledger a {\n vacuum yes\n }\n}",
		"llm {\n ledger a {\n spool\n }\n}",
		"llm {\n ledger a {\n spool /d big\n }\n}",
		"llm {\n ledger a {\n spool /d 1KiB\n }\n}",
		"llm {\n ledger a {\n spool /d 1GiB x\n }\n}",
		"llm {\n budgets {\n max_wait soon\n }\n}",
		"llm {\n budgets {\n alert_allow\n }\n}",
		"llm {\n budgets x\n}",
	} {
		if err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestSpoolNameIgnoresPassword(t *testing.T) {
	a := spoolName("postgres://gw:one@db:5432/llm?sslmode=require")
	if b := spoolName("postgres://gw:two@db:5432/llm?sslmode=require"); a != b {
		t.Errorf("a password change moves the spool: %s vs %s", a, b)
	}
	if c := spoolName("postgres://gw:one@db2:5432/llm?sslmode=require"); a == c {
		t.Error("two databases share a spool")
	}
}
