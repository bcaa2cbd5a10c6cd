package app

import (
	"context"
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
)

// refusingStage answers every call as llm_ratelimit refuses one.
type refusingStage struct{ seen *http.Request }

func (s *refusingStage) Admit(w http.ResponseWriter, r *http.Request, _ *identity.Caller) bool {
	s.seen = r
	w.Header().Set("Retry-After", "7")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"error":{"type":"rate_limit_exceeded","code":"rate_limit_exceeded","message":"policy p: limit reached"}}`))
	return false
}

// admittingStage admits and marks the call budgeted, as llm_ratelimit's
// Admit does.
type admittingStage struct{}

func (admittingStage) Admit(_ http.ResponseWriter, r *http.Request, _ *identity.Caller) bool {
	handoff.From(r.Context()).MarkBudgeted(nil)
	return true
}

// budgetStage counts its calls and refuses when spent.
type budgetStage struct {
	calls int
	spent bool
}

func (b *budgetStage) AdmitBudget(_ http.Header, _ *http.Request, _ *identity.Caller, _ []byte) (*budgets.Charge, error) {
	b.calls++
	if b.spent {
		return nil, apierror.New(http.StatusPreconditionFailed, apierror.TypeRateLimit, "the budget is spent").WithCode("budget_exceeded")
	}
	return nil, nil
}

func TestAdmitCall(t *testing.T) {
	a := &App{admissions: new(admissions)}
	id := &identity.Caller{Name: "ci", WorkspaceID: "ws"}
	ctx := context.Background()
	hdr := http.Header{"X-Gateway-Metadata": {`{"mcp_tool":"read"}`}}

	// No stage, no usage limit: nothing to admit or settle.
	if req, ref := a.AdmitCall(ctx, "", nil, id, "/mcp", hdr, []byte("{}")); req != nil || ref != nil {
		t.Fatalf("no limits: %v %+v", req, ref)
	}

	refuse := &refusingStage{}
	release := a.RegisterAdmission("k", refuse)
	req, ref := a.AdmitCall(ctx, "k", nil, id, "/mcp", hdr, []byte("{}"))
	if req != nil || ref == nil || ref.Status != 429 || ref.Code != "rate_limit_exceeded" || ref.Message != "policy p: limit reached" ||
		ref.Header.Get("Retry-After") != "7" {
		t.Fatalf("refused: %v %+v", req, ref)
	}
	if got := refuse.seen.Header.Get("X-Gateway-Metadata"); got != `{"mcp_tool":"read"}` || refuse.seen.URL.Path != "/mcp" {
		t.Fatalf("the stage saw %q %s", got, refuse.seen.URL.Path)
	}
	if c, ok := handoff.From(refuse.seen.Context()).Given(a.Issuer()); !ok || c != id {
		t.Fatal("the stage's request does not carry the caller as given")
	}
	release()

	// A stage that applied the usage limits: the budget stage is not
	// asked again.
	b := &budgetStage{}
	release = a.RegisterAdmission("k", admittingStage{})
	if req, ref := a.AdmitCall(ctx, "k", b, id, "/mcp", hdr, nil); req == nil || ref != nil || b.calls != 0 {
		t.Fatalf("admitted by the stage: %v %+v, budget asked %d times", req, ref, b.calls)
	}
	release()

	// A key no longer registered passes the API policies' stage, which
	// applies no usage limit: the budget stage does, and refuses.
	release = a.RegisterAdmission(APIAdmissionKey, &admittingBudgetless{})
	b.spent = true
	req, ref = a.AdmitCall(ctx, "gone", b, id, "/mcp", hdr, nil)
	if req != nil || ref == nil || ref.Status != 412 || ref.Code != "budget_exceeded" || b.calls != 1 {
		t.Fatalf("spent: %v %+v (%d)", req, ref, b.calls)
	}
	release()
}

// admittingBudgetless admits without applying usage limits.
type admittingBudgetless struct{}

func (*admittingBudgetless) Admit(http.ResponseWriter, *http.Request, *identity.Caller) bool {
	return true
}
