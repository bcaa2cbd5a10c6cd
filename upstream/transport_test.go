package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

func TestWrapTLSDialsOnlyCheckedLiterals(t *testing.T) {
	var dialed []string
	inner := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return nil, errors.New("inner dial")
	}
	deny, _ := NewGuard(nil)
	allow, _ := NewGuard([]string{"loopback"})
	tests := []struct {
		name   string
		g      *Guard
		addr   string
		want   []string // addresses the inner dialer saw
		refuse bool
	}{
		{"unmarked passes through", nil, "localhost:443", []string{"localhost:443"}, false},
		{"loopback literal refused", deny, "127.0.0.1:443", nil, true},
		{"name resolving to loopback refused", deny, "localhost:443", nil, true},
		{"mapped loopback refused", deny, "[::ffff:127.0.0.1]:443", nil, true},
		{"unspecified refused", deny, "0.0.0.0:443", nil, true},
		{"allowed literal pinned", allow, "127.0.0.1:8443", []string{"127.0.0.1:8443"}, false},
		{"garbage address refused", deny, "no-port", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialed = nil
			ctx := context.Background()
			if tt.g != nil {
				ctx = WithGuard(ctx, tt.g)
			}
			_, err := WrapTLS(inner)(ctx, "tcp", tt.addr)
			if tt.refuse != errors.Is(err, ErrBlocked) {
				t.Fatalf("err %v, refuse=%v", err, tt.refuse)
			}
			if len(dialed) != len(tt.want) || (len(dialed) > 0 && dialed[0] != tt.want[0]) {
				t.Fatalf("inner dialer saw %v, want %v", dialed, tt.want)
			}
		})
	}
	// A name allowed by policy reaches the inner dialer only as literals.
	dialed = nil
	_, _ = WrapTLS(inner)(WithGuard(context.Background(), allow), "tcp", "localhost:9443")
	for _, a := range dialed {
		if a != "127.0.0.1:9443" && a != "[::1]:9443" {
			t.Fatalf("inner dialer saw %q, want a checked literal", a)
		}
	}
	if len(dialed) == 0 {
		t.Fatal("allowed name was not dialled")
	}
}

func TestWrapTransportCoversTLSDialer(t *testing.T) {
	var plain, tls int
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { plain++; return nil, errors.New("x") },
		DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			tls++
			return nil, errors.New("x")
		},
	}
	WrapTransport(tr)
	g, _ := NewGuard(nil)
	ctx := WithGuard(context.Background(), g)
	if _, err := tr.DialContext(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("plain: %v", err)
	}
	if _, err := tr.DialTLSContext(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("tls: %v", err)
	}
	if plain != 0 || tls != 0 {
		t.Fatalf("refused dials reached the transport's dialers (%d plain, %d tls)", plain, tls)
	}
}
