package realtime

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestHubKeepAndRefuse: a hub shut down with keep leaves its sessions
// open and refuses new ones.
func TestHubKeepAndRefuse(t *testing.T) {
	p := newPair(t, Limits{}, func(ctx context.Context, c *websocket.Conn) { _, _, _ = c.Read(ctx) })
	c := p.dial(t)
	deadline := time.Now().Add(10 * time.Second)
	for p.hub.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.hub.Shutdown(0, true)
	if p.hub.Len() != 1 {
		t.Fatalf("%d sessions after a keeping shutdown", p.hub.Len())
	}
	if p.hub.Add(&Session{}) {
		t.Error("a shut-down hub took a session")
	}
	if err := c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
		t.Errorf("the kept session is closed: %v", err)
	}
}
