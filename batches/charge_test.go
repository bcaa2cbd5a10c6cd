package batches

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// TestLineChargeClaimedOnce: every run of a line carries the line's
// Charge; the run's claim is its own however often it is made, and the
// claim of another run of the same line (an instance that took the batch
// over) is refused, in Caddy's storage and in Redis alike. Storage claims
// are deleted when the batch ends.
func TestLineChargeClaimedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(*testing.T) *env
	}{
		{"storage", func(t *testing.T) *env { return newEnv(t, Config{}) }},
		{"redis", clusterEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			eng := e.engine
			var (
				mu     sync.Mutex
				charge = map[string]*Charge{}
				errs   []string
			)
			e.runner.hook = func(ctx context.Context, body []byte) error {
				ch := ChargeOf(ctx)
				cid := "req-" + gjson.GetBytes(body, "n").Raw
				fail := func(msg string) {
					mu.Lock()
					errs = append(errs, cid+": "+msg)
					mu.Unlock()
				}
				if ch == nil || ch.CustomID != cid || !IsManagedID(ch.BatchID) {
					fail("no charge of its line")
					return nil
				}
				for i := 0; i < 2; i++ {
					if ok, err := ch.Claim(ctx); !ok || err != nil {
						fail("its own claim refused")
					}
				}
				eng.mu.Lock()
				j := eng.running[ch.BatchID]
				eng.mu.Unlock()
				if ok, err := eng.chargeFor(j, cid).Claim(ctx); ok || err != nil {
					fail("another run's claim was granted")
				}
				mu.Lock()
				charge[cid] = ch
				mu.Unlock()
				return nil
			}
			b := e.create(t, eng, e.upload(t, chatLines(5)), nil)
			e.wait(t, eng, b.ID, StatusCompleted)
			if len(errs) > 0 || len(charge) != 5 {
				t.Fatalf("%d lines charged: %v", len(charge), errs)
			}
			if tc.name != "storage" {
				return // Redis claims expire after the completion window
			}
			// They are deleted just after the batch is shown ended.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				keys, _ := files.ListKeys(context.Background(), e.kv, eng.chargesDir(e.caller.WorkspaceID, b.ID), false)
				if len(keys) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the ended batch's claims are kept: %v", keys)
				}
			}
		})
	}
}

func TestChargeIDIsBounded(t *testing.T) {
	long := strings.Repeat("x", MaxChargeID+1)
	for _, tc := range []struct{ in, want string }{
		{"req-1", "req-1"},
		{strings.Repeat("x", MaxChargeID), strings.Repeat("x", MaxChargeID)},
		{long, "sha256:"},
	} {
		got := chargeID(tc.in)
		if !strings.HasPrefix(got, tc.want) || len(got) > MaxChargeID {
			t.Errorf("chargeID(%d bytes) = %q", len(tc.in), got)
		}
	}
	if chargeID(long) == chargeID(long+"y") {
		t.Error("two long custom_ids share a charge id")
	}
	var none *Charge
	if ok, err := none.Claim(context.Background()); !ok || err != nil || ChargeOf(context.Background()) != nil {
		t.Error("a request that is no batch line is not charged as one")
	}
}
