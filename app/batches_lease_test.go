package app

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestBatchesLeaseCaddyfile: `batches { lease <d> }` sets the lease of
// batches run under Redis, within its bounds (2s to 5m).
func TestBatchesLeaseCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, lease string
		want        time.Duration
		wantErr     string
	}{
		{name: "seconds", lease: "3s", want: 3 * time.Second},
		{name: "lowest", lease: "2s", want: 2 * time.Second},
		{name: "highest", lease: "5m", want: 5 * time.Minute},
		{name: "too short", lease: "1500ms", wantErr: "batches lease must be a duration from 2s to 5m0s"},
		{name: "too long", lease: "301s", wantErr: "batches lease must be a duration"},
		{name: "zero", lease: "0s", wantErr: "batches lease must be a duration"},
		{name: "negative", lease: "-10s", wantErr: "batches lease must be a duration"},
		{name: "not a duration", lease: "soon", wantErr: "batches lease must be a duration"},
		{name: "two values", lease: "10s 20s", wantErr: "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := new(App)
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n batches {\n lease " + tc.lease + "\n }\n}"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.BatchLimits == nil || a.BatchLimits.Lease != caddy.Duration(tc.want) {
				t.Fatalf("batches %+v, want lease %v", a.BatchLimits, tc.want)
			}
		})
	}
	// JSON configs are checked at provision time as well.
	for _, d := range []time.Duration{0, 2 * time.Second, 5 * time.Minute} {
		if err := checkLease(d); err != nil {
			t.Errorf("lease %v refused: %v", d, err)
		}
	}
	for _, d := range []time.Duration{time.Second, 6 * time.Minute, -time.Second} {
		if err := checkLease(d); err == nil {
			t.Errorf("lease %v accepted", d)
		}
	}
}
