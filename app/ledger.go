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
	"github.com/dustin/go-humanize"
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
	// SpoolDir is where records wait on disk while the database does not
	// take them (default: a folder of "ledger-spool" in Caddy's data
	// directory, named for the database); "off" keeps no spool. Each
	// process needs its own.
	SpoolDir string `json:"spool_dir,omitempty"`
	// SpoolMaxSize bounds the spool, in bytes (default
	// ledger.DefaultSpoolBytes, an hour at 1,000 requests a second);
	// records beyond it are dropped and counted.
	SpoolMaxSize int64 `json:"spool_max_size,omitempty"`
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
	if cfg.Retention < 0 || cfg.Queue < 0 || cfg.SpoolMaxSize < 0 {
		return fmt.Errorf("ledger: retention, queue and spool size must not be negative")
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
		return openLedger(dsn, cfg, logger)
	})
	if err != nil {
		return err
	}
	l := v.(pooledLedger).Ledger
	l.SetRetention(time.Duration(cfg.Retention))
	a.ledgerKey, a.ledger = key, l
	return nil
}

// connectWait bounds the first attempt to reach the ledger's database
// while the config provisions; after it the gateway starts anyway and
// the ledger keeps trying (records wait in the spool).
const connectWait = 10 * time.Second

// openLedger opens the ledger of dsn with its spool. A database that
// cannot be reached (PostgreSQL away) does not stop the gateway: the
// ledger starts, spools, and reaches it later; a configuration the
// database refuses (password, database name) does.
func openLedger(dsn string, cfg LedgerConfig, logger *zap.Logger) (caddy.Destructor, error) {
	db, err := ledger.OpenDeferred(dsn)
	if err != nil {
		return nil, err
	}
	kind := "sqlite"
	if db.Postgres() {
		kind = "postgres"
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectWait)
	err = db.Connect(ctx)
	cancel()
	switch {
	case err != nil && (!db.Postgres() || ledger.ConfigError(err)):
		db.Close()
		return nil, err
	case err != nil:
		logger.Warn("usage ledger database unreachable; the gateway starts, records wait in the spool, and the ledger keeps trying",
			zap.String("store", kind), zap.Error(err))
	default:
		logger.Info("usage ledger open", zap.String("store", kind))
	}
	var spool *ledger.Spool
	if cfg.SpoolDir != "off" {
		dir := cfg.SpoolDir
		if dir == "" {
			dir = filepath.Join(caddy.AppDataDir(), "ledger-spool", spoolName(dsn))
		}
		if spool, err = ledger.OpenSpool(dir, cfg.SpoolMaxSize); err != nil {
			// Without a spool the ledger still records; while its
			// database is away it drops records, as it counts and logs.
			logger.Error("usage ledger spool unavailable: records are dropped while the database is away", zap.Error(err))
			spool = nil
		} else if n := spool.Pending(); n > 0 {
			logger.Info("usage ledger spool holds records of an earlier run; they are written first",
				zap.Uint64("records", n), zap.String("spool", dir))
		}
	}
	return pooledLedger{ledger.New(db, ledger.Config{Queue: cfg.Queue, Logger: logger, Spool: spool})}, nil
}

// spoolName names a database's default spool folder: a digest of its
// DSN without the password, so a password changed in the environment
// keeps the spool the records wait in.
func spoolName(dsn string) string {
	id := dsn
	if u, err := url.Parse(dsn); err == nil && u.User != nil && strings.Contains(dsn, "://") {
		u.User = url.User(u.User.Username())
		id = u.String()
	} else if abs, err := filepath.Abs(dsn); err == nil {
		id = abs
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
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
//		spool     <directory | off> [<max size>]
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
		if name == "spool" {
			if !d.NextArg() {
				return d.ArgErr()
			}
			cfg.SpoolDir = d.Val()
			if d.NextArg() {
				n, err := humanize.ParseBytes(d.Val())
				if err != nil || n < 1<<20 || n > 1<<50 {
					return d.Errf("ledger spool size must be a size of at least 1MiB, like 2GiB")
				}
				cfg.SpoolMaxSize = int64(n)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			continue
		}
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
