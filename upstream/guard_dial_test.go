package upstream

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// countingListener accepts on 127.0.0.1 and counts connections.
func countingListener(t *testing.T) (port string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	return port
}

func TestGuardDialRefusesBeforeConnecting(t *testing.T) {
	g, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	open, accepted := countingListener(t)
	closed := closedPort(t)
	for _, host := range []string{"127.0.0.1", "localhost", "::1", "0.0.0.0", "::ffff:127.0.0.1", "127.1.2.3"} {
		var msgs []string
		for _, port := range []string{open, closed} {
			conn, err := g.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
			if err == nil {
				_ = conn.Close()
				t.Fatalf("%s:%s: dial succeeded", host, port)
			}
			if !errors.Is(err, ErrBlocked) {
				t.Fatalf("%s:%s: got %v, want ErrBlocked", host, port, err)
			}
			var be *BlockedError
			if !errors.As(err, &be) {
				t.Fatalf("%s:%s: errors.As BlockedError failed", host, port)
			}
			msgs = append(msgs, be.Error())
		}
		if msgs[0] != msgs[1] {
			t.Errorf("%s: open and closed ports answer differently: %q vs %q", host, msgs[0], msgs[1])
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("refused dials opened %d connections", n)
	}
}

func TestGuardDialAllowsConfiguredRange(t *testing.T) {
	g, err := NewGuard([]string{"loopback"})
	if err != nil {
		t.Fatal(err)
	}
	open, _ := countingListener(t)
	conn, err := g.DialContext(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", open))
	if err != nil {
		t.Fatalf("loopback allowed, dial failed: %v", err)
	}
	_ = conn.Close()
}

func TestWrapUsesGuardOnlyWhenMarked(t *testing.T) {
	open, _ := countingListener(t)
	var inner atomic.Int64
	base := func(ctx context.Context, network, addr string) (net.Conn, error) {
		inner.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	dial := Wrap(base)
	addr := net.JoinHostPort("127.0.0.1", open)

	conn, err := dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("unmarked dial: %v", err)
	}
	_ = conn.Close()
	if inner.Load() != 1 {
		t.Fatalf("unmarked dial did not use the transport's dialer")
	}

	g, _ := NewGuard(nil)
	if _, err := dial(WithGuard(context.Background(), g), "tcp", addr); !errors.Is(err, ErrBlocked) {
		t.Fatalf("marked dial: got %v, want ErrBlocked", err)
	}
	if inner.Load() != 1 {
		t.Fatalf("marked dial went through the unchecked dialer")
	}
}

func TestGuardControlParsesResolvedAddress(t *testing.T) {
	g, _ := NewGuard(nil)
	tests := []struct {
		addr string
		ok   bool
	}{
		{"8.8.8.8:443", true},
		{"[2606:4700::1111]:443", true},
		{"127.0.0.1:80", false},
		{"[::1]:80", false},
		{"169.254.169.254:80", false},
		{"[fe80::1%eth0]:80", false},
		{"[2002:7f00:1::]:80", false},
		{"[64:ff9b::7f00:1]:80", false},
		{"not-an-address", false},
	}
	for _, tt := range tests {
		err := g.control(context.Background(), "tcp", tt.addr, nil)
		if (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want allowed=%v", tt.addr, err, tt.ok)
		}
	}
	var nilGuard *Guard
	if err := nilGuard.control(context.Background(), "tcp", "127.0.0.1:1", nil); err != nil {
		t.Errorf("nil guard refused: %v", err)
	}
}
