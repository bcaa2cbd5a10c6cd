package app

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// batchEngines holds the file store and managed batch engine for the
// whole process, keyed by their storage, so a config reload keeps every
// running batch: the new config takes a reference before the old one's
// Cleanup drops its own, and only the last release stops the engine.
var batchEngines = caddy.NewUsagePool()

type batchEngine struct {
	files  *files.Store
	engine *batches.Engine
}

// Destruct stops dispatch; unfinished batches stay in storage and resume
// at the next start.
func (b batchEngine) Destruct() error {
	b.engine.Stop()
	return nil
}

// batchState is the app's part of the files and batches feature.
type batchState struct {
	// BatchLimits sets the limits of the file store and the batch engine.
	BatchLimits *BatchesConfig `json:"batches,omitempty"`

	batchKey string
	files    *files.Store
	batches  *batches.Engine
}

// BatchesConfig is the "batches" option of the llm app. The engine and
// store are shared by every config of the process (they outlive
// reloads), so the newest loaded config's limits apply.
type BatchesConfig struct {
	// MaxFileBytes is the largest file the gateway's file store accepts,
	// uploads and batch result files alike (default files.DefaultMaxBytes,
	// 100 MiB). An upload beyond it is a 413; a batch whose output would
	// exceed it fails with output_too_large.
	MaxFileBytes int64 `json:"max_file_bytes,omitempty"`
	// MaxActive is how many managed batches may be queued or running in
	// the process at once (default batches.DefaultMaxActive); a create
	// beyond it is a 429.
	MaxActive int `json:"max_active,omitempty"`
	// MaxRunning is how many of them dispatch lines at once (default
	// batches.DefaultMaxRunning); the others wait, holding only their
	// record.
	MaxRunning int `json:"max_running,omitempty"`
	// Lease is how long a batch's lease in Redis lasts without renewal
	// (default batches.DefaultLease, 10 s; from batches.MinLease to
	// batches.MaxLease): a batch whose instance died is taken over by
	// another within one and a half leases. Without Redis it has no
	// effect. Every instance of a cluster should set the same lease.
	Lease caddy.Duration `json:"lease,omitempty"`
}

// provisionBatches shares the process's engine for this config's storage:
// Redis when configured (so every instance sees every file and batch),
// else Caddy's storage.
func (a *App) provisionBatches() error {
	var (
		kv  files.KV = a.storage
		key          = "storage|" + fmt.Sprintf("%T", a.storage)
	)
	if s, ok := a.storage.(fmt.Stringer); ok {
		key += "|" + s.String()
	}
	prefix, clustered := "", a.redis != nil
	if clustered {
		prefix = a.RedisKeyPrefix()
		kv, key = files.NewRedisKV(a.redis), "redis|"+a.redisKey+"|"+prefix
	}
	instance, err := caddy.InstanceID()
	if err != nil {
		return fmt.Errorf("batches: instance id: %v", err)
	}
	logger := a.logger
	v, _, err := batchEngines.LoadOrNew(key, func() (caddy.Destructor, error) {
		// An empty prefix keeps each store's default namespace.
		var filesNS, batchesNS string
		if prefix != "" {
			filesNS, batchesNS = prefix+"llm_gateway/files", prefix+"llm_gateway/batches"
		}
		store := files.NewStore(kv, files.Config{Prefix: filesNS})
		cfg := batches.Config{KV: kv, Files: store, Instance: instance.String(), Logger: logger.Named("batches"), Prefix: batchesNS}
		if clustered {
			// With Redis the cluster owns the batches: each runs under a
			// lease, is taken over when its owner dies, and records every
			// finished line at once, so a takeover reruns only the lines
			// that were in flight.
			cfg.Lease, cfg.CheckpointEvery = batches.DefaultLease, 1
			if l := a.BatchLimits; l != nil && checkLease(time.Duration(l.Lease)) == nil && l.Lease > 0 {
				cfg.Lease = time.Duration(l.Lease)
			}
		}
		eng := batches.NewEngine(cfg)
		return batchEngine{files: store, engine: eng}, nil
	})
	if err != nil {
		return err
	}
	be := v.(batchEngine)
	a.batchKey, a.files, a.batches = key, be.files, be.engine
	var cfg BatchesConfig
	if a.BatchLimits != nil {
		cfg = *a.BatchLimits
	}
	if cfg.MaxFileBytes < 0 || cfg.MaxActive < 0 || cfg.MaxRunning < 0 {
		return fmt.Errorf("batches: limits must not be negative")
	}
	if err := checkLease(time.Duration(cfg.Lease)); err != nil {
		return err
	}
	be.engine.SetLease(time.Duration(cfg.Lease))
	be.files.SetMaxBytes(cfg.MaxFileBytes)
	be.engine.SetLimits(batches.Limits{MaxActive: cfg.MaxActive, MaxRunning: cfg.MaxRunning})
	return nil
}

// checkLease refuses a batch lease outside its bounds; 0 is the default.
func checkLease(d time.Duration) error {
	if d != 0 && (d < batches.MinLease || d > batches.MaxLease) {
		return fmt.Errorf("batches: lease must be from %v to %v, got %v", batches.MinLease, batches.MaxLease, d)
	}
	return nil
}

// Caller returns the identity a managed batch's lines run as: the
// Caddyfile key that created it while it is still configured, the API
// key (by id) while it is usable, or the identity provider's user while
// its record is active (app/users.go). false stops the batch: the key was
// removed, revoked, disabled or has expired.
func (a *App) Caller(c batches.Caller) (*identity.Caller, bool) {
	for _, k := range a.keys {
		if k.id.Name == c.Name && k.id.WorkspaceID == c.WorkspaceID && k.id.OrganisationID == c.OrganisationID {
			return k.id, true
		}
	}
	if identity.ReservedName(c.Name) {
		return a.userCaller(c)
	}
	if c.KeyID == "" || a.keyStore == nil {
		return nil, false
	}
	id, res := a.keyStore.Holder(c.KeyID)
	if res != keys.Valid || id.WorkspaceID != c.WorkspaceID {
		return nil, false
	}
	return id, true
}

// startBatches resumes this instance's unfinished batches, once per
// engine (a reload's Start finds it started).
func (a *App) startBatches() {
	if a.batches != nil {
		a.batches.Start()
	}
}

// cleanupBatches releases this config's reference to the engine.
func (a *App) cleanupBatches() {
	if a.batchKey != "" {
		_, _ = batchEngines.Delete(a.batchKey)
		a.batchKey = ""
	}
}

// Files returns the gateway's file store (uploads for providers without
// a files API, and batch results).
func (a *App) Files() *files.Store { return a.files }

// Batches returns the managed batch engine. Each llm_gateway route
// registers its pipeline with Batches().RegisterRunner at provision time
// and withdraws it at cleanup.
func (a *App) Batches() *batches.Engine { return a.batches }
