package app

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
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
	batchKey string
	files    *files.Store
	batches  *batches.Engine
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
	if a.redis != nil {
		kv, key = files.NewRedisKV(a.redis), "redis|"+a.redisKey
	}
	instance, err := caddy.InstanceID()
	if err != nil {
		return fmt.Errorf("batches: instance id: %v", err)
	}
	logger := a.logger
	v, _, err := batchEngines.LoadOrNew(key, func() (caddy.Destructor, error) {
		store := files.NewStore(kv, files.Config{})
		eng := batches.NewEngine(batches.Config{KV: kv, Files: store, Instance: instance.String(), Logger: logger.Named("batches")})
		return batchEngine{files: store, engine: eng}, nil
	})
	if err != nil {
		return err
	}
	be := v.(batchEngine)
	a.batchKey, a.files, a.batches = key, be.files, be.engine
	return nil
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

// Batches returns the managed batch engine. The handler installs its
// pipeline with Batches().SetRunner at provision time.
func (a *App) Batches() *batches.Engine { return a.batches }
