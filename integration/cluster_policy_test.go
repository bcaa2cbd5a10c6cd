package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestClusterPolicyChangeOnIdleReplica runs two gateways on one Redis (this
// process's Caddy, A, and the gateway binary, B) and changes a policy on A
// while B is idle with its policy set loaded: a burst of 100 concurrent
// requests on B right after the change admits no more than the new limit.
// Before the version check, B served its old set to every request but the
// one reloading it (12–58 admitted against 10/min).
func TestClusterPolicyChangeOnIdleReplica(t *testing.T) {
	up, baseB := startRedisPair(t)

	// idle makes B load its policy set with one request, then leaves it
	// idle for longer than its 1s version check, as a replica behind a
	// load balancer that sent it nothing for a while.
	idle := func(meta string) {
		if resp, raw := rlChat(t, baseB, gatewayKey, up.URL, "", "x-gateway-metadata", meta); resp.StatusCode != 200 {
			t.Fatalf("warm-up request on B: %d %s", resp.StatusCode, raw)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	burst := func(meta string) map[int]int {
		codes, _ := fire(t, []string{baseB}, up.URL, 100, "x-gateway-metadata", meta)
		return countStatuses(codes)
	}
	policy := func(tag string, value int) string {
		return fmt.Sprintf(`{"type":"requests","unit":"rpm","value":%d,"name":"cluster-%s",`+
			`"conditions":[{"key":"metadata.case","value":"%s"}],"group_by":[{"key":"metadata.case"}]}`, value, tag, tag)
	}

	tests := []struct {
		name string
		// setup runs on A before B loads its set, change after B went
		// idle; limit is what the burst may admit.
		setup  func(tag string)
		change func(tag string)
		limit  int
	}{
		{"created", func(string) {}, func(tag string) { createPolicy(t, gatewayKey, policy(tag, 10)) }, 10},
		{"lowered", func(tag string) {
			createPolicy(t, gatewayKey, policy(tag, 50))
			// B learns of a change within its 1s version check: the
			// warm-up request must find the policy there to count
			// against it (it did not always, and the burst then had
			// room for 10).
			time.Sleep(1100 * time.Millisecond)
		}, func(tag string) {
			id := listPolicyByName(t, "cluster-"+tag)
			if st, m := api(t, gatewayKey, http.MethodPut, "/policies/rate-limits/"+id, `{"value":10}`); st != 200 {
				t.Fatalf("lowering: %d %v", st, m)
			}
		}, 9}, // the warm-up request counts against the policy
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tag := tc.name + "-" + uuid.NewString()
			meta := fmt.Sprintf(`{"case":%q}`, tag)
			tc.setup(tag)
			idle(meta)
			before := up.count()
			tc.change(tag)
			got := burst(meta)
			t.Logf("policy %s on A, 100 concurrent requests on idle B: %d admitted, %d refused", tc.name, got[200], got[429])
			if got[200] > tc.limit || got[200]+got[429] != 100 || up.count()-before != got[200] {
				t.Fatalf("B admitted %d of 100 (%v) after the policy was %s on A with room for %d; the provider saw %d",
					got[200], got, tc.name, tc.limit, up.count()-before)
			}
			if got[200] != tc.limit {
				t.Fatalf("B admitted %d, want exactly %d (a false refusal)", got[200], tc.limit)
			}
		})
	}
}

// listPolicyByName returns the id of the caller's policy with this name.
func listPolicyByName(t *testing.T, name string) string {
	t.Helper()
	st, m := api(t, gatewayKey, http.MethodGet, "/policies/rate-limits", "")
	if st != 200 {
		t.Fatalf("list: %d %v", st, m)
	}
	data, _ := m["data"].([]any)
	for _, d := range data {
		if p, _ := d.(map[string]any); p["name"] == name {
			id, _ := p["id"].(string)
			return id
		}
	}
	t.Fatalf("no policy named %s in %v", name, m)
	return ""
}
