package handlers

// holdReason says why a non-stream success of an attempt is held whole
// before the client has any of it, rather than passed through as it
// arrives. A stream is never held by the attempt (hooks that can deny
// hold it themselves, guardrails_stream.go).
type holdReason uint8

const (
	// holdDeadline: the attempt has a timeout to meet, and an answer
	// half sent could no longer be replaced by a retry.
	holdDeadline holdReason = 1 << iota
	// holdSink: the cache stores the answer before the client has it,
	// so the client's next identical request finds it.
	holdSink
	// holdWhole: the answer is wrapped whole (a prompt completion's
	// envelope) or wanted whole (the semantic cache's embedding calls).
	holdWhole
	// holdAdapted: a translated target's chat answer is converted
	// back to the client's format.
	holdAdapted
	// holdHooks: after-request hooks judge, change or annotate it.
	holdHooks
	// holdTranslated: the provider's format is translated to OpenAI's.
	holdTranslated
)

// holdReasons returns why an attempt's success is held: none for a
// stream.
func holdReasons(stream bool, reasons ...holdReason) holdReason {
	if stream {
		return 0
	}
	var h holdReason
	for _, r := range reasons {
		h |= r
	}
	return h
}

// when returns r when ok, else no reason.
func (r holdReason) when(ok bool) holdReason {
	if ok {
		return r
	}
	return 0
}

// holds reports whether the capture holds the answer. A translation
// alone does not: the translator then reads the answer as it arrives.
func (h holdReason) holds() bool { return h&^holdTranslated != 0 }

// must reports whether the answer cannot reach the client unheld, even
// when the held-answer budget is spent: a deadline and a cache store
// can do without holding it, the others cannot.
func (h holdReason) must() bool {
	return h&(holdWhole|holdAdapted|holdHooks|holdTranslated) != 0
}
