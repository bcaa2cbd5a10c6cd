package handlers

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// TestGatewayUnmarshalCaddyfile: each llm_gateway option lands in its
// field, and each mistake is refused with a message naming it.
func TestGatewayUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    Gateway
		wantErr string
	}{
		{name: "bare", input: "llm_gateway"},
		{name: "empty block", input: "llm_gateway {\n}"},
		{name: "sizes", input: "llm_gateway {\n max_request_body 1MB\n max_response_body 8MiB\n cache_size 21MB\n}",
			want: Gateway{MaxRequestBody: 1e6, MaxResponseBody: 8 << 20, CacheSize: 21e6}},
		{name: "trace content", input: "llm_gateway {\n trace_content\n}", want: Gateway{TraceContent: true}},
		{name: "custom hosts add up", input: "llm_gateway {\n custom_host_allow loopback private\n custom_host_allow 192.0.2.0/24\n}",
			want: Gateway{CustomHostAllow: []string{"loopback", "private", "192.0.2.0/24"}}},
		{name: "argument", input: "llm_gateway extra", wantErr: "wrong argument count"},
		{name: "size missing", input: "llm_gateway {\n cache_size\n}", wantErr: "wrong argument count"},
		{name: "size zero", input: "llm_gateway {\n max_request_body 0\n}", wantErr: `max_request_body: invalid size "0"`},
		{name: "size junk", input: "llm_gateway {\n max_response_body lots\n}", wantErr: `max_response_body: invalid size "lots"`},
		{name: "cache size junk", input: "llm_gateway {\n cache_size big\n}", wantErr: `cache_size: invalid size "big"`},
		{name: "trace content argument", input: "llm_gateway {\n trace_content yes\n}", wantErr: "wrong argument count"},
		{name: "custom hosts missing", input: "llm_gateway {\n custom_host_allow\n}", wantErr: "wrong argument count"},
		{name: "other transport", input: "llm_gateway {\n transport fastcgi\n}", wantErr: `only the http transport is supported, got "fastcgi"`},
		{name: "unknown option", input: "llm_gateway {\n timeout 5s\n}", wantErr: `unknown llm_gateway option "timeout"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g Gateway
			err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %+v, want %+v", g, tc.want)
			}
		})
	}
}

// TestGatewayTransport: the transport block is parsed by reverse_proxy's
// http transport and kept as its JSON, named by "protocol".
func TestGatewayTransport(t *testing.T) {
	var g Gateway
	d := caddyfile.NewTestDispenser("llm_gateway {\n transport http {\n  keepalive_idle_conns_per_host 1024\n  dial_timeout 5s\n }\n trace_content\n}")
	if err := g.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	tr := gjson.ParseBytes(g.Transport)
	if tr.Get("protocol").Str != "http" || tr.Get("keep_alive.max_idle_conns_per_host").Int() != 1024 || tr.Get("dial_timeout").Int() != 5e9 {
		t.Fatalf("transport %s", g.Transport)
	}
	if !g.TraceContent {
		t.Fatal("the option after the transport block was lost")
	}
	if err := new(Gateway).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_gateway {\n transport http {\n  no_such_option\n }\n}")); err == nil {
		t.Fatal("an unknown transport option was accepted")
	}
}

// TestGatewayUnmarshalModule: another module can nest llm_gateway in its
// own block with caddyfile.UnmarshalModule, the way reverse_proxy nests its
// transport.
func TestGatewayUnmarshalModule(t *testing.T) {
	d := caddyfile.NewTestDispenser("outer {\n llm_gateway {\n  max_request_body 2KB\n  custom_host_allow any\n }\n}")
	d.Next() // outer
	if !d.NextBlock(0) || d.Val() != "llm_gateway" {
		t.Fatalf("at %q", d.Val())
	}
	unm, err := caddyfile.UnmarshalModule(d, "http.handlers.llm_gateway")
	if err != nil {
		t.Fatal(err)
	}
	g, ok := unm.(*Gateway)
	if !ok {
		t.Fatalf("got %T", unm)
	}
	if g.MaxRequestBody != 2000 || !reflect.DeepEqual(g.CustomHostAllow, []string{"any"}) {
		t.Fatalf("nested gateway %+v", g)
	}
	if d.NextBlock(0) {
		t.Fatalf("the outer block has %q left", d.Val())
	}
}
