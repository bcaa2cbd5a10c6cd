package ratelimit

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rl := new(Handler)
	if err := rl.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return rl, nil
}

// UnmarshalCaddyfile parses the llm_ratelimit directive:
//
//	llm_ratelimit [<matcher>] {
//		max_request_body <size>
//		default_output_tokens <n>
//		reservation_lease <duration>
//		policy <name> {
//			type      requests|tokens
//			unit      rpm|rph|rpd
//			value     <n>
//			condition <key> <value>
//			group_by  <key>...
//		}
//	}
//
// The block is optional: a bare `llm_ratelimit` enforces the policies
// created through the API. condition may repeat (all must hold; the value
// "*" accepts any non-empty value); without any the policy applies to every
// authenticated request. group_by may repeat or list several keys; without
// any each gateway key is counted separately. Keys are workspace_id,
// organisation_id, api_key (the gateway key's name), virtual_key, provider,
// model, config_id and metadata.<key>.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "max_request_body":
			var v string
			if !d.Args(&v) {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(v)
			if err != nil || n == 0 || n > math.MaxInt64 {
				return d.Errf("max_request_body: invalid size %q", v)
			}
			h.MaxRequestBody = int64(n)
		case "default_output_tokens":
			var v string
			if !d.Args(&v) {
				return d.ArgErr()
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > int64(policies.MaxValue) {
				return d.Errf("default_output_tokens: want a positive number of tokens, got %q", v)
			}
			h.DefaultOutputTokens = n
		case "reservation_lease":
			var v string
			if !d.Args(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < time.Second || dur > 24*time.Hour {
				return d.Errf("reservation_lease: want a duration from 1s to 24h, like 10m, got %q", v)
			}
			h.ReservationLease = caddy.Duration(dur)
		case "policy":
			sp, err := parsePolicy(d)
			if err != nil {
				return err
			}
			for _, prev := range h.Policies {
				if prev.Name == sp.Name {
					return d.Errf("policy %q is declared twice", sp.Name)
				}
			}
			h.Policies = append(h.Policies, sp)
		default:
			return d.Errf("unknown llm_ratelimit option %q", d.Val())
		}
	}
	return nil
}

// parsePolicy reads one `policy <name> { … }` block and validates it, so a
// mistake is reported with its line rather than at provision time.
func parsePolicy(d *caddyfile.Dispenser) (*StaticPolicy, error) {
	sp := new(StaticPolicy)
	if !d.Args(&sp.Name) {
		return nil, d.ArgErr()
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	var haveValue bool
	for d.NextBlock(1) {
		opt := d.Val()
		switch opt {
		case "type", "unit":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.ArgErr()
			}
			if opt == "type" {
				sp.Type = v
			} else {
				sp.Unit = v
			}
		case "value":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return nil, d.ArgErr()
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
				return nil, d.Errf("policy %q: value must be a number greater than 0, got %q", sp.Name, v)
			}
			sp.Value, haveValue = f, true
		case "condition":
			var c policies.Condition
			if !d.Args(&c.Key, &c.Value) || d.NextArg() {
				return nil, d.ArgErr()
			}
			sp.Conditions = append(sp.Conditions, c)
		case "group_by":
			keys := d.RemainingArgs()
			if len(keys) == 0 {
				return nil, d.ArgErr()
			}
			for _, k := range keys {
				sp.GroupBy = append(sp.GroupBy, policies.GroupBy{Key: k})
			}
		default:
			return nil, d.Errf("policy %q: unknown option %q", sp.Name, opt)
		}
	}
	if !haveValue {
		return nil, d.Errf("policy %q: value is required", sp.Name)
	}
	if _, err := sp.policy(); err != nil {
		return nil, d.Errf("policy %q: %v", sp.Name, err)
	}
	return sp, nil
}

// Interface guard.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
