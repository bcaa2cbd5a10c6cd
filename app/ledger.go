package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// ledgers holds the process's open ledgers keyed by their database, so a
// config reload keeps the queue, the writer and the connections: the new
// config takes a reference before the old one's Cleanup drops its own,
// and only the last release flushes the queue and closes the database.
var ledgers = caddy.NewUsagePool()

type pooledLedger struct{ *ledger.Ledger }

// Destruct writes what is queued and closes the database.
func (p pooledLedger) Destruct() error { return p.Close() }

// LedgerConfig is the "ledger" option of the llm app: where the usage
// ledger is kept and for how long.
type LedgerConfig struct {
	// DSN is a postgres:// URL (a cluster's shared ledger) or the path of
	// a SQLite file (the embedded store); empty is the file
	// "llm-ledger.db" in Caddy's data directory. Give a password as an
	// {env.VAR} placeholder: the config is served by the admin API.
	DSN string `json:"dsn,omitempty"`
	// Retention is how long records are kept (default 90 days).
	Retention caddy.Duration `json:"retention,omitempty"`
	// Queue is how many records may wait for the writer (default
	// ledger.DefaultQueue); beyond it records are dropped and counted.
	Queue int `json:"queue,omitempty"`
}

// ledgerState is the app's part of the usage ledger.
type ledgerState struct {
	// Ledger, when set, records every finished request in the usage
	// ledger that the analytics, logs and usage APIs read.
	Ledger *LedgerConfig `json:"ledger,omitempty"`

	ledgerKey string
	ledger    *ledger.Ledger
}

// provisionLedger opens (or shares, across a reload) the configured
// ledger and applies its migrations.
func (a *App) provisionLedger(ctx caddy.Context) error {
	if a.Ledger == nil {
		return nil
	}
	cfg := *a.Ledger
	if cfg.Retention < 0 || cfg.Queue < 0 {
		return fmt.Errorf("ledger: retention and queue must not be negative")
	}
	if err := ledger.RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("ledger: registering metrics: %v", err)
	}
	if literalPassword(cfg.DSN) {
		a.logger.Warn("the ledger's database URL holds a literal password: it is visible in GET /config/ of the admin API and in autosave.json; give it as an {env.VAR} placeholder")
	}
	dsn := caddy.NewReplacer().ReplaceAll(cfg.DSN, "")
	if strings.Contains(cfg.DSN, "{") && dsn == "" {
		return fmt.Errorf("ledger: the database placeholder is empty (is its environment variable set?)")
	}
	if dsn == "" {
		dsn = filepath.Join(caddy.AppDataDir(), "llm-ledger.db")
	}
	// The pool key is a digest: the DSN may hold a password.
	sum := sha256.Sum256([]byte(dsn))
	key := "ledger|" + hex.EncodeToString(sum[:])
	logger := a.logger.Named("ledger")
	v, _, err := ledgers.LoadOrNew(key, func() (caddy.Destructor, error) {
		octx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		db, err := ledger.Open(octx, dsn)
		if err != nil {
			return nil, err
		}
		kind := "sqlite"
		if db.Postgres() {
			kind = "postgres"
		}
		logger.Info("usage ledger open", zap.String("store", kind))
		return pooledLedger{ledger.New(db, ledger.Config{Queue: cfg.Queue, Logger: logger})}, nil
	})
	if err != nil {
		return err
	}
	l := v.(pooledLedger).Ledger
	l.SetRetention(time.Duration(cfg.Retention))
	a.ledgerKey, a.ledger = key, l
	return nil
}

// literalPassword reports whether a database URL carries a password
// written out rather than as a placeholder.
func literalPassword(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return false
	}
	p, ok := u.User.Password()
	return ok && p != "" && !strings.Contains(p, "{")
}

// cleanupLedger releases this config's reference to its ledger.
func (a *App) cleanupLedger() {
	if a.ledgerKey != "" {
		_, _ = ledgers.Delete(a.ledgerKey)
		a.ledgerKey, a.ledger = "", nil
	}
}

// UsageLedger returns the usage ledger, or nil when none is configured (a
// nil ledger records nothing, so callers record without checking).
func (a *App) UsageLedger() *ledger.Ledger {
	if a == nil {
		return nil
	}
	return a.ledger
}

// LedgerDB returns the ledger's database for queries, or nil.
func (a *App) LedgerDB() *ledger.DB {
	db, _ := a.UsageLedger().Store().(*ledger.DB)
	return db
}

// unmarshalLedger parses
//
//	ledger [<postgres:// URL | SQLite file path>] {
//		retention <duration>
//		queue     <n>
//	}
func (a *App) unmarshalLedger(d *caddyfile.Dispenser) error {
	cfg := &LedgerConfig{}
	if d.NextArg() {
		cfg.DSN = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(1) {
		name := d.Val()
		var v string
		if !d.Args(&v) || d.NextArg() {
			return d.ArgErr()
		}
		switch name {
		case "retention":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("ledger retention must be a positive duration (e.g. 90d)")
			}
			cfg.Retention = caddy.Duration(dur)
		case "queue":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 1<<22 {
				return d.Errf("ledger queue must be a whole number from 1 to %d", 1<<22)
			}
			cfg.Queue = n
		default:
			return d.Errf("unknown ledger option %q", name)
		}
	}
	a.Ledger = cfg
	return nil
}
