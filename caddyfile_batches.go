package llmgateway

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
)

// parseBatches parses the `batches` block of the global llm option:
//
//	batches {
//		max_file_size <size>   # largest stored file (default 100MiB)
//		max_active    <n>      # batches queued or running (default 100)
//		max_running   <n>      # batches dispatching at once (default 8)
//	}
func parseBatches(d *caddyfile.Dispenser, a *app.App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	cfg := &app.BatchesConfig{}
	for d.NextBlock(1) {
		opt := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "max_file_size":
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("batches max_file_size must be a positive size, like 100MiB")
			}
			cfg.MaxFileBytes = int64(n)
		case "max_active", "max_running":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("batches %s must be a positive integer", opt)
			}
			if opt == "max_active" {
				cfg.MaxActive = n
			} else {
				cfg.MaxRunning = n
			}
		default:
			return d.Errf("unknown batches option %q", opt)
		}
	}
	a.BatchLimits = cfg
	return nil
}
