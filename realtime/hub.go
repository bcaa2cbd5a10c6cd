package realtime

import (
	"sync"
	"time"
)

// Ender is a session a Hub can end: a Realtime relay (*Session) or a
// Responses WebSocket (*ResponsesSession).
type Ender interface {
	// GoAway ends the session with 1001.
	GoAway()
}

// Hub holds the sessions one configuration opened, so that its end can
// end them: at once with 1001 when the server shuts down, or after the
// close delay when a reload replaced the configuration (the sessions keep
// running on the configuration they opened under until then).
type Hub struct {
	mu       sync.Mutex
	sessions map[Ender]struct{}
	closed   bool
	timer    *time.Timer
}

// Add makes s one of h's sessions; false when h was shut down (s is
// then ended at once).
func (h *Hub) Add(s Ender) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if h.sessions == nil {
		h.sessions = make(map[Ender]struct{})
	}
	h.sessions[s] = struct{}{}
	return true
}

// Remove forgets s, which ended.
func (h *Hub) Remove(s Ender) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sessions, s)
}

// Len returns the number of sessions open.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Shutdown refuses new sessions and ends h's sessions with 1001 after
// delay; at once, waiting for their close handshakes, when delay is zero
// or less. With keep set the sessions are left to end by themselves.
func (h *Hub) Shutdown(delay time.Duration, keep bool) {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	switch {
	case keep:
	case delay <= 0:
		h.goAway()
	default:
		h.mu.Lock()
		h.timer = time.AfterFunc(delay, h.goAway)
		h.mu.Unlock()
	}
}

// goAway ends every session, all at once (a close handshake may wait
// for its peer), and returns when they all ended.
func (h *Hub) goAway() {
	h.mu.Lock()
	all := make([]Ender, 0, len(h.sessions))
	for s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.GoAway()
		}()
	}
	wg.Wait()
}
