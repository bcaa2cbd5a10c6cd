// Command caddy is Caddy with the LLM gateway modules, exactly what
// `xcaddy build --with github.com/caddy-llm-gateway/caddy-llm-gateway`
// generates. Tests and CI build this; users may build either.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-llm-gateway/caddy-llm-gateway"
)

func main() {
	caddycmd.Main()
}
