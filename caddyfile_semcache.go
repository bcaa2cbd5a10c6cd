package llmgateway

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
)

// parseSemanticCache parses the `semantic_cache` block of the global llm
// option:
//
//	semantic_cache {
//		embedding     <virtual_key> <model>
//		threshold     <0 < similarity <= 1>   # default 0.95
//		max_memory    <size>                   # default 256MiB
//		max_entries   <n per partition>        # default 10000
//		embed_timeout <duration>               # default 5s
//	}
//
// The values are checked when the config loads (llm app provisioning).
func parseSemanticCache(d *caddyfile.Dispenser, a *app.App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.SemanticCache != nil {
		return d.Err("semantic_cache: configured twice")
	}
	sc := &app.SemanticCacheConfig{}
	for d.NextBlock(1) {
		opt := d.Val()
		if opt == "embedding" {
			if !d.Args(&sc.Embedding.VirtualKey, &sc.Embedding.Model) || d.NextArg() {
				return d.ArgErr()
			}
			continue
		}
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "threshold":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return d.Errf("semantic_cache: threshold must be a number in (0, 1], got %q", v)
			}
			sc.Threshold = f
		case "max_memory":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("semantic_cache: max_memory: invalid size %q", v)
			}
			sc.MaxMemory = int64(n)
		case "max_entries":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("semantic_cache: max_entries must be a positive integer, got %q", v)
			}
			sc.MaxEntries = n
		case "embed_timeout":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("semantic_cache: embed_timeout: invalid duration %q", v)
			}
			sc.EmbedTimeout = caddy.Duration(dur)
		default:
			return d.Errf("unknown semantic_cache option %q", opt)
		}
	}
	if sc.Embedding.VirtualKey == "" {
		return d.Err("semantic_cache: embedding <virtual_key> <model> is required")
	}
	a.SemanticCache = sc
	return nil
}
