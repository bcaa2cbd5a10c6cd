package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAdmitAsIdentity: a managed batch line carries no gateway key; Admit
// judges it as the identity it is given, answering the 429 itself.
func TestAdmitAsIdentity(t *testing.T) {
	ctl := newControl()
	h := newHandler(t, ctl, &StaticPolicy{Name: "two", Type: "requests", Unit: "rpm", Value: 2})
	for i, want := range []bool{true, true, false} {
		w := httptest.NewRecorder()
		if got := h.Admit(w, newRequest("", []byte(chatBody)), testAlice); got != want {
			t.Fatalf("line %d: admitted %v, want %v", i, got, want)
		}
		if !want && (w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "") {
			t.Fatalf("refusal %d %v %s", w.Code, w.Header(), w.Body)
		}
	}
	// Another identity has counters of its own.
	if !h.Admit(httptest.NewRecorder(), newRequest("", []byte(chatBody)), testBob) {
		t.Fatal("bob refused by alice's counter")
	}
}

// TestAdmissionKey: the same Caddyfile policies give the same key, so a
// batch created before a reload finds its stage after it; other policies
// give another.
func TestAdmissionKey(t *testing.T) {
	a := []*StaticPolicy{{Name: "p", Type: "requests", Unit: "rpm", Value: 2}}
	b := []*StaticPolicy{{Name: "p", Type: "requests", Unit: "rpm", Value: 2}}
	c := []*StaticPolicy{{Name: "p", Type: "requests", Unit: "rpm", Value: 3}}
	if admissionKey(a, 1) != admissionKey(b, 1) {
		t.Fatal("same policies, different keys")
	}
	if admissionKey(a, 1) == admissionKey(c, 1) || admissionKey(a, 1) == admissionKey(a, 2) || admissionKey(nil, 1) == admissionKey(a, 1) {
		t.Fatal("different configurations share a key")
	}
}
