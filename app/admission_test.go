package app

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"

	"net/http"
	"testing"
)

type stage string

func (stage) Admit(http.ResponseWriter, *http.Request, *identity.Caller) bool { return true }

func TestAdmissionRegistry(t *testing.T) {
	a := &App{admissions: new(admissions)}
	if _, ok := a.Admission("rl-1"); ok {
		t.Fatal("empty registry found a stage")
	}
	relAPI := a.RegisterAdmission(APIAdmissionKey, stage("api"))
	relOld := a.RegisterAdmission("rl-1", stage("old"))
	// A second handler with the same policies (or the next config's)
	// takes the key; releasing the first leaves it.
	relNew := a.RegisterAdmission("rl-1", stage("new"))
	relOld()
	for _, tc := range []struct {
		key  string
		want Admission
		ok   bool
	}{
		{"rl-1", stage("new"), true},
		{"rl-gone", stage("api"), true}, // route changed: API policies only
		{"", nil, false},                // route had no llm_ratelimit
	} {
		s, ok := a.Admission(tc.key)
		if ok != tc.ok || s != tc.want {
			t.Errorf("Admission(%q) = %v, %v; want %v, %v", tc.key, s, ok, tc.want, tc.ok)
		}
	}
	relNew()
	relAPI()
	if _, ok := a.Admission("rl-1"); ok {
		t.Fatal("released stages still found")
	}
	var unprovisioned App
	if _, ok := unprovisioned.Admission("rl-1"); ok {
		t.Fatal("unprovisioned app found a stage")
	}
}
