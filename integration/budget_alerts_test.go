package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

const alertSecret = "alert-secret-for-tests-0123456789"

// signedAlert is one webhook call that verified.
type signedAlert struct {
	Event       string   `json:"event"`
	ID          string   `json:"id"`
	PolicyID    string   `json:"policy_id"`
	Used        *float64 `json:"used"`
	Group       string   `json:"group"`
	PeriodStart string   `json:"period_start"`
	PeriodEnd   string   `json:"period_end"`
	WorkspaceID string   `json:"workspace_id"`
}

// alertReceiver is a webhook on 127.0.0.1 that checks every call as
// docs/ledger.md tells a receiver to ("Verifying an alert"): the
// HMAC-SHA256 of x-gateway-timestamp, ".", and the raw body, keyed with
// the secret, hex, equals x-gateway-signature after "sha256=", compared in
// constant time, and the timestamp is within 5 minutes of now. A call that
// fails is answered 401 and reported on bad.
func alertReceiver(t *testing.T, secret string) (url string, got <-chan signedAlert, bad <-chan string) {
	ok, fail := make(chan signedAlert, 16), make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		ts := r.Header.Get("x-gateway-timestamp")
		sig, _ := strings.CutPrefix(r.Header.Get("x-gateway-signature"), "sha256=")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		want := hex.EncodeToString(mac.Sum(nil))
		sent, err := strconv.ParseInt(ts, 10, 64)
		var al signedAlert
		switch {
		case err != nil || math.Abs(float64(time.Now().Unix()-sent)) > 300:
			fail <- "stale or missing timestamp " + strconv.Quote(ts)
		case !hmac.Equal([]byte(sig), []byte(want)):
			fail <- "bad signature on " + string(body)
		case json.Unmarshal(body, &al) != nil || r.Header.Get("x-gateway-event") != al.Event:
			fail <- "body or event header: " + string(body)
		default:
			ok <- al
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ok, fail
}

// nextAlert waits for the next verified call (a deadline, not a timing
// assertion: the sweep that finds a period's end runs every second).
func nextAlert(t *testing.T, got <-chan signedAlert, bad <-chan string) signedAlert {
	t.Helper()
	select {
	case al := <-got:
		return al
	case msg := <-bad:
		t.Fatalf("the receiver refused a call: %s", msg)
	case <-time.After(15 * time.Second):
		t.Fatal("no alert arrived")
	}
	return signedAlert{}
}

// TestBudgetAlertsSignedThroughCaddy spends a usage limit through a real
// Caddy whose alert webhook is a receiver verifying every signature: it
// gets threshold, then exhausted as the budget is spent, and reset once
// the gateway's clock passes the period's end; the de-duplication keys are
// under the configured key_prefix.
func TestBudgetAlertsSignedThroughCaddy(t *testing.T) {
	rc := requireRedis(t)
	up := newFakeOpenAI(t)
	hook, got, bad := alertReceiver(t, alertSecret)
	os.Setenv("TEST_ALERT_SECRET", alertSecret)
	prefix := "alerts-" + uuid.NewString()[:8] + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		if keys, _ := rc.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	})
	llm := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\tkey_prefix %s\n\t\t}\n\t\t", redistest.Addr(), rlRedisDB, prefix) +
		fmt.Sprintf("budgets {\n\t\t\talert_webhook %s/hook?token=receiver-token\n\t\t\talert_secret {env.TEST_ALERT_SECRET}\n\t\t\talert_allow loopback\n\t\t}", hook)
	loadRL(t, rlSite{Redis: llm})

	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{
		"name": "alerted", "type": "cost", "credit_limit": 0.00002, "alert_threshold": 0.00001, "periodic_reset": "monthly",
		"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`)
	if status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	id := m["id"].(string)
	spent := false
	for i := 0; i < 20 && !spent; i++ {
		resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
		switch resp.StatusCode {
		case 200:
		case http.StatusPreconditionFailed:
			spent = true
		default:
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	if !spent {
		t.Fatal("the budget was never spent")
	}
	th := nextAlert(t, got, bad)
	ex := nextAlert(t, got, bad)
	if th.Event != "threshold" || ex.Event != "exhausted" {
		t.Fatalf("events %s, %s; want threshold, exhausted", th.Event, ex.Event)
	}
	for _, al := range []signedAlert{th, ex} {
		if al.PolicyID != id || al.WorkspaceID != rlWS || al.Used == nil || al.PeriodEnd == "" || al.ID == "" {
			t.Errorf("%s alert %+v", al.Event, al)
		}
	}
	if *th.Used < 0.00001 || *ex.Used < 0.00002 {
		t.Errorf("used %v at threshold, %v exhausted", *th.Used, *ex.Used)
	}
	for _, ev := range []string{"threshold", "exhausted"} {
		if n, _ := rc.Keys(context.Background(), prefix+"llm:budget-once:"+ev+"|budget|"+id+"*").Result(); len(n) != 1 {
			t.Errorf("%d %s once-keys under the key_prefix, want 1", len(n), ev)
		}
	}

	// The period ends on the gateway's clock: the reset is sent, once.
	end, err := time.Parse(time.RFC3339, ex.PeriodEnd)
	if err != nil {
		t.Fatal(err)
	}
	skew := time.Until(end) + time.Minute
	t.Cleanup(handlers.SetClock(func() time.Time { return time.Now().Add(skew) }))
	re := nextAlert(t, got, bad)
	if re.Event != "reset" || re.PolicyID != id || re.Group != ex.Group || re.PeriodStart != ex.PeriodEnd || re.Used != nil {
		t.Fatalf("after the period: %+v, want the reset of %s from %s", re, ex.Group, ex.PeriodEnd)
	}
	// Neither the secret nor the webhook URL's token is logged.
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{alertSecret, "receiver-token"} {
		if strings.Contains(string(logged), secret) {
			t.Errorf("the gateway's log holds %q", secret)
		}
	}
}

// TestBudgetAlertSecretRequired loads configs whose alert secret is
// missing, too short (an unset placeholder) or alone: each load fails,
// saying what is wrong, without the secret in the message.
func TestBudgetAlertSecretRequired(t *testing.T) {
	os.Setenv("TEST_ALERT_SECRET_SHORT", "short-secret")
	os.Unsetenv("TEST_ALERT_SECRET_UNSET")
	for _, tc := range []struct{ name, block, want string }{
		{"no secret", "alert_webhook https://hooks.example.com/x", "alert_webhook needs alert_secret"},
		{"short secret", "alert_webhook https://hooks.example.com/x\n\t\t\talert_secret {env.TEST_ALERT_SECRET_SHORT}", "at least 16 bytes"},
		{"unset placeholder", "alert_webhook https://hooks.example.com/x\n\t\t\talert_secret {env.TEST_ALERT_SECRET_UNSET}", "at least 16 bytes"},
		{"secret alone", "alert_secret {env.TEST_ALERT_SECRET_SHORT}", "alert_secret is set without alert_webhook"},
	} {
		s := rlSite{Redis: "budgets {\n\t\t\t" + tc.block + "\n\t\t}", Storage: storageDir(t)}
		newHTTPPort()
		cfg, err := adapt(s.caddyfile())
		if err != nil {
			t.Fatalf("%s: adapting: %v", tc.name, err)
		}
		err = caddy.Load(cfg, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "short-secret") {
			t.Errorf("%s: load error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
