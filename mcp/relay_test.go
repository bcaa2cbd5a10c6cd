package mcp

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestServerError(t *testing.T) {
	server := &jsonrpc.Error{Code: -32000, Message: "tool exploded"}
	rejected := &jsonrpc.Error{Code: sdkRejected, Message: "rejected by transport"}
	tests := []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"the server's error", fmt.Errorf("calling: %w", server), server},
		{"the server's error in a non-2xx answer", fmt.Errorf("POST: %w: %w: Bad Request", server, rejected), server},
		{"the transport's rejection", fmt.Errorf("POST: %w: %w", rejected, errors.New("connection reset")), nil},
		{"closing", &jsonrpc.Error{Code: sdkClientClosing}, nil},
		{"no JSON-RPC error", errors.New("EOF"), nil},
	}
	for _, tt := range tests {
		got, ok := serverError(tt.err)
		if got != tt.want || ok != (tt.want != nil) {
			t.Errorf("%s: %v %v, want %v", tt.name, got, ok, tt.want)
		}
	}
}

// TestProgressRoutes: a token of the gateway's is routed while its call
// runs; any other token, or one whose call ended, is dropped.
func TestProgressRoutes(t *testing.T) {
	p := newProgressRoutes()
	a := p.add(context.Background(), nil, "caller-a")
	b := p.add(context.Background(), nil, 7.0)
	if a == b || a == "caller-a" {
		t.Fatalf("tokens %q %q", a, b)
	}
	p.mu.Lock()
	if p.m[a].token != "caller-a" || p.m[b].token != 7.0 {
		t.Fatalf("routes %+v", p.m)
	}
	p.mu.Unlock()
	// Relaying a token without a session, or an unknown one, is a no-op.
	p.relay(context.Background(), &sdk.ProgressNotificationClientRequest{Params: &sdk.ProgressNotificationParams{ProgressToken: "caller-a"}})
	p.remove(a)
	p.remove(b)
	if len(p.m) != 0 {
		t.Fatalf("routes left: %+v", p.m)
	}
}
