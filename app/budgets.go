package app

import (
	"fmt"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// BudgetsConfig is the "budgets" option of the llm app: how usage limits
// (created through /v1/policies/usage-limits) alert and wait.
type BudgetsConfig struct {
	// AlertWebhook receives a POST when a limit's spend first reaches its
	// alert_threshold in a period (once per limit, group and period
	// across the cluster). Give a token in it as an {env.VAR}
	// placeholder.
	AlertWebhook string `json:"alert_webhook,omitempty"`
	// AlertSecret keys the HMAC-SHA256 signature every webhook call
	// carries (x-gateway-signature over x-gateway-timestamp and the
	// body), at least 16 bytes; required with AlertWebhook. Give it as an
	// {env.VAR} or {file.path} placeholder.
	AlertSecret string `json:"alert_secret,omitempty"`
	// AlertAllow lets the webhook reach addresses the egress guard
	// refuses by default (custom_host_allow's vocabulary: loopback,
	// private, CIDRs).
	AlertAllow []string `json:"alert_allow,omitempty"`
	// MaxWait is how long a request on a spent budget waits for requests
	// in flight on it to settle before it is refused (default 10s).
	MaxWait caddy.Duration `json:"max_wait,omitempty"`
	// Lease is how long a reservation counts without being settled
	// before it is given back (default 10m, at least 1s): longer than
	// any request may run, so only those of a killed instance expire.
	Lease caddy.Duration `json:"lease,omitempty"`
}

// budgetState is the app's part of usage limits.
type budgetState struct {
	// Budgets configures usage-limit alerts and waiting.
	Budgets *BudgetsConfig `json:"budgets,omitempty"`

	budgetStore *budgets.Store
	budgets     *budgets.Enforcer
	alerter     *budgets.Alerter
}

// provisionBudgets opens the usage-limit store (Redis when configured, so
// every instance enforces every limit, else Caddy's storage) and the
// enforcer counting in the app's limiter. It runs after provisionShared.
//
// With Redis, a write to the store waits until every instance that
// listens enforces it, and the instance listens until ctx ends (the
// config is unloaded).
func (a *App) provisionBudgets(ctx caddy.Context) error {
	var kv kvstore.KV = a.records
	var (
		once  budgets.Markers
		marks budgets.Marks
	)
	if a.recordsRedis {
		kv = kvstore.NewRedis(a.redis, 0).WithPrefix(a.RedisKeyPrefix())
	}
	if a.redis != nil {
		once = budgets.RedisOnce{Client: a.redis, Prefix: a.RedisKeyPrefix()}
		marks = budgets.RedisMarks{Client: a.redis, Prefix: a.RedisKeyPrefix()}
	} else {
		// The process's own, kept across reloads as the in-process
		// counters are: a reload must not send a period's alerts again.
		v, _, err := alertStates.LoadOrNew(memoryLimiterKey, func() (caddy.Destructor, error) {
			return alertState{budgets.NewMemoryOnce(nil), budgets.NewMemoryMarks()}, nil
		})
		if err != nil {
			return err
		}
		go func() {
			<-ctx.Done()
			_, _ = alertStates.Delete(memoryLimiterKey)
		}()
		st := v.(alertState)
		once, marks = st.once, st.marks
	}
	a.budgetStore = budgets.NewStore(kv, nil)
	logger := a.logger.Named("budgets")
	var warn logthrottle.Throttle
	a.budgetStore.OnUnknown = func(err error) {
		// At most every 10 s: the store is read again every 2 s.
		if ok, held := warn.Allow(time.Now(), 10*time.Second); ok {
			logger.Warn("usage limits cannot be read; none is enforced until the store answers",
				zap.Error(err), zap.Int64("suppressed_since_last", held))
		}
	}
	if a.redis != nil {
		notice := budgets.NewRedisNotice(a.redis, a.RedisKeyPrefix())
		a.budgetStore.SetNotifier(notice)
		go notice.Watch(ctx, a.budgetStore, nil)
	}
	cfg := BudgetsConfig{}
	if a.Budgets != nil {
		cfg = *a.Budgets
	}
	if cfg.MaxWait < 0 {
		return fmt.Errorf("budgets: max_wait must not be negative")
	}
	if cfg.AlertSecret != "" && cfg.AlertWebhook == "" {
		return fmt.Errorf("budgets: alert_secret is set without alert_webhook")
	}
	if cfg.AlertWebhook != "" {
		repl := caddy.NewReplacer()
		hook := repl.ReplaceAll(cfg.AlertWebhook, "")
		if u, err := url.Parse(hook); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("budgets: alert_webhook must be an http(s) URL")
		}
		if cfg.AlertSecret == "" {
			return fmt.Errorf("budgets: alert_webhook needs alert_secret, the key receivers verify each alert's signature with")
		}
		secret := repl.ReplaceAll(cfg.AlertSecret, "")
		if len(secret) < minAlertSecret {
			return fmt.Errorf("budgets: alert_secret must be at least %d bytes (is its placeholder set?)", minAlertSecret)
		}
		if literalSecret(cfg.AlertSecret) {
			a.logger.Warn("budgets: a literal alert_secret is visible in GET /config/ of the admin API and in autosave.json; give it as {env.VAR} or {file.path}")
		}
		guard, err := upstream.NewGuard(cfg.AlertAllow)
		if err != nil {
			return fmt.Errorf("budgets: alert_allow: %v", err)
		}
		if err := budgets.RegisterAlertMetrics(ctx.GetMetricsRegistry()); err != nil {
			return err
		}
		client := guardrails.NewEgressClient(guard)
		client.Timeout = budgets.AlertTimeout
		a.alerter = budgets.NewAlerter(hook, client, once, a.logger.Named("budgets"),
			budgets.WithSecret([]byte(secret)), budgets.WithMarks(marks), budgets.WithClock(Now))
		go a.alerter.Run(ctx)
	}
	a.budgets = budgets.NewEnforcer(a.limiter, &budgetSource{a: a}, a.alerter, nil)
	// A cost counter's first use in a period carries over the old
	// micro-dollar counter's spend, and with a ledger a counter the
	// shared store lost is rebuilt from it; the markers saying a counter
	// was seeded are shared by every instance (and kept across reloads).
	var seeder budgets.Seeder
	if db := a.LedgerDB(); db != nil {
		seeder = budgets.LedgerSeeder{DB: db}
	}
	a.budgets.SetSeeder(seeder, once)
	if cfg.MaxWait > 0 {
		a.budgets.MaxWait = time.Duration(cfg.MaxWait)
	}
	if cfg.Lease != 0 {
		if time.Duration(cfg.Lease) < time.Second {
			return fmt.Errorf("budgets: lease must be at least 1s")
		}
		a.budgets.Lease = time.Duration(cfg.Lease)
	}
	return nil
}

// minAlertSecret is the shortest alert_secret accepted: 128 bits.
const minAlertSecret = 16

// alertStates holds the process's alert de-duplication and reset marks
// when there is no Redis, so a reload keeps them.
var alertStates = caddy.NewUsagePool()

type alertState struct {
	once  *budgets.MemoryOnce
	marks *budgets.MemoryMarks
}

func (alertState) Destruct() error { return nil }

// BudgetEnforcer returns the usage-limit enforcer (the rate limiter's
// admission reserves on it).
func (a *App) BudgetEnforcer() *budgets.Enforcer { return a.budgets }

// BudgetStore returns the usage-limit store (the usage-limits API).
func (a *App) BudgetStore() *budgets.Store { return a.budgetStore }

// unmarshalBudgets parses
//
//	budgets {
//		alert_webhook <url>
//		alert_secret  <secret>
//		alert_allow   <loopback | private | CIDR>...
//		max_wait      <duration>
//		lease         <duration>
//	}
func (a *App) unmarshalBudgets(d *caddyfile.Dispenser) error {
	cfg := &BudgetsConfig{}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(1) {
		switch name := d.Val(); name {
		case "alert_webhook":
			if !d.Args(&cfg.AlertWebhook) || d.NextArg() {
				return d.ArgErr()
			}
		case "alert_secret":
			if !d.Args(&cfg.AlertSecret) || d.NextArg() {
				return d.ArgErr()
			}
		case "alert_allow":
			cfg.AlertAllow = append(cfg.AlertAllow, d.RemainingArgs()...)
			if len(cfg.AlertAllow) == 0 {
				return d.ArgErr()
			}
		case "max_wait":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return d.Errf("budgets max_wait must be a duration")
			}
			cfg.MaxWait = caddy.Duration(dur)
		case "lease":
			var v string
			dur, err := time.Duration(0), error(nil)
			if d.Args(&v) && !d.NextArg() {
				dur, err = caddy.ParseDuration(v)
			}
			if v == "" || err != nil || dur < time.Second {
				return d.Errf("budgets lease must be a duration of at least 1s")
			}
			cfg.Lease = caddy.Duration(dur)
		default:
			return d.Errf("unknown budgets option %q", name)
		}
	}
	a.Budgets = cfg
	return nil
}
