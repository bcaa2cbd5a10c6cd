package handlers

import "testing"

// TestHoldReasons: an attempt's success is held for a deadline, a cache
// store, an envelope, a translated target or hooks, never as a stream; a
// translation alone reads it as it arrives; only a deadline and a cache
// store can do without holding it when the held-answer budget is spent.
func TestHoldReasons(t *testing.T) {
	tests := []struct {
		name        string
		stream      bool
		reasons     []holdReason
		holds, must bool
	}{
		{"plain answer", false, nil, false, false},
		{"stream with every reason", true, []holdReason{holdDeadline, holdSink, holdWhole, holdAdapted, holdHooks, holdTranslated}, false, false},
		{"deadline", false, []holdReason{holdDeadline}, true, false},
		{"cache store", false, []holdReason{holdSink}, true, false},
		{"envelope", false, []holdReason{holdWhole}, true, true},
		{"translated target", false, []holdReason{holdAdapted}, true, true},
		{"hooks", false, []holdReason{holdHooks}, true, true},
		{"translation alone", false, []holdReason{holdTranslated}, false, true},
		{"deadline and translation", false, []holdReason{holdDeadline, holdTranslated}, true, true},
		{"reason not given", false, []holdReason{holdHooks.when(false)}, false, false},
	}
	for _, tt := range tests {
		h := holdReasons(tt.stream, tt.reasons...)
		if h.holds() != tt.holds || h.must() != tt.must {
			t.Errorf("%s: holds %v must %v, want %v %v", tt.name, h.holds(), h.must(), tt.holds, tt.must)
		}
	}
}

// TestHoldReasonsMatchesRule checks every combination against the rule
// the attempt applied before the reasons were named.
func TestHoldReasonsMatchesRule(t *testing.T) {
	for bits := range 1 << 7 {
		on := func(i int) bool { return bits&(1<<i) != 0 }
		stream, timer, sink, whole, adapted, hooks, tr := on(0), on(1), on(2), on(3), on(4), on(5), on(6)
		h := holdReasons(stream, holdDeadline.when(timer), holdSink.when(sink), holdWhole.when(whole),
			holdAdapted.when(adapted), holdHooks.when(hooks), holdTranslated.when(tr))
		wantHold := (timer || whole || adapted || hooks || sink) && !stream
		wantMust := !stream && (tr || whole || adapted || hooks)
		if h.holds() != wantHold || h.must() != wantMust {
			t.Fatalf("bits %07b: holds %v must %v, want %v %v", bits, h.holds(), h.must(), wantHold, wantMust)
		}
	}
}
