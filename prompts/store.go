package prompts

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Store keeps the prompts created through the API. A store only loads and
// writes whole records; the Registry holds every rule (slugs, versions,
// workspaces). Implementations are safe for concurrent use.
type Store interface {
	// Load returns every stored prompt, validated and compiled.
	Load(ctx context.Context) ([]*Prompt, error)
	// Mutate runs fn over the stored prompts while holding a lock that
	// excludes every other Mutate, on this instance and on any other
	// sharing the store, then writes the records fn returns in put and
	// deletes the ids in del. fn may be called again if the store detects
	// a concurrent write; it must not keep state between calls. An error
	// from fn aborts without writing and is returned as is.
	Mutate(ctx context.Context, fn func(all []*Prompt) (put []*Prompt, del []string, err error)) error
}

// encodeRecord and decodeRecord are the storage format of one prompt: the
// Prompt as JSON, every version inside it. Prompts are small and read
// whole, so one record per prompt keeps each write a single atomic put.
func encodeRecord(p *Prompt) ([]byte, error) { return json.Marshal(p) }

func decodeRecord(data []byte) (*Prompt, error) {
	p := new(Prompt)
	if err := json.Unmarshal(data, p); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// MemoryStore keeps prompts in process. It is for tests and single-use
// setups: its records die with the process.
type MemoryStore struct {
	mu   sync.Mutex
	recs map[string][]byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{recs: map[string][]byte{}} }

// Load implements Store.
func (s *MemoryStore) Load(context.Context) ([]*Prompt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked()
}

func (s *MemoryStore) loadLocked() ([]*Prompt, error) {
	out := make([]*Prompt, 0, len(s.recs))
	for id, data := range s.recs {
		p, err := decodeRecord(data)
		if err != nil {
			return nil, fmt.Errorf("prompts: decoding %s: %w", id, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Mutate implements Store.
func (s *MemoryStore) Mutate(_ context.Context, fn func([]*Prompt) ([]*Prompt, []string, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.loadLocked()
	if err != nil {
		return err
	}
	put, del, err := fn(all)
	if err != nil {
		return err
	}
	for _, p := range put {
		data, err := encodeRecord(p)
		if err != nil {
			return err
		}
		s.recs[p.ID] = data
	}
	for _, id := range del {
		delete(s.recs, id)
	}
	return nil
}

// snapshotCache serves the stored prompts from memory, reloading them at
// most once per TTL, so resolving a prompt on the request path costs no
// storage I/O. When the snapshot is old, one caller reloads it while the
// others keep using the old one; a write through this instance
// invalidates it and the next caller waits for the reload, so an instance
// sees its own writes at once. Another instance's writes show within one
// TTL.
type snapshotCache struct {
	ttl   time.Duration
	now   func() time.Time
	load  func(ctx context.Context) ([]*Prompt, error)
	onErr func(error)

	state  atomic.Pointer[snapshot]
	gen    atomic.Uint64
	reload sync.Mutex
}

type snapshot struct {
	prompts []*Prompt
	fetched time.Time
	gen     uint64
}

func (c *snapshotCache) fresh(s *snapshot) bool {
	return s != nil && s.gen == c.gen.Load() && c.now().Sub(s.fetched) < c.ttl
}

func (c *snapshotCache) invalidate() { c.gen.Add(1) }

func (c *snapshotCache) get(ctx context.Context) ([]*Prompt, error) {
	s := c.state.Load()
	if c.fresh(s) {
		return s.prompts, nil
	}
	if s != nil && s.gen == c.gen.Load() {
		// Only old: someone else may be reloading; serve what we have.
		if !c.reload.TryLock() {
			return s.prompts, nil
		}
	} else {
		c.reload.Lock()
	}
	defer c.reload.Unlock()
	if s = c.state.Load(); c.fresh(s) {
		return s.prompts, nil
	}
	gen := c.gen.Load()
	ps, err := c.load(ctx)
	if err != nil {
		if s == nil || s.gen != gen {
			return nil, err
		}
		if c.onErr != nil {
			c.onErr(err)
		}
		// Keep serving the previous set and retry after another TTL
		// rather than sending every request to a storage that is down.
		c.state.Store(&snapshot{prompts: s.prompts, fetched: c.now(), gen: gen})
		return s.prompts, nil
	}
	c.state.Store(&snapshot{prompts: ps, fetched: c.now(), gen: gen})
	return ps, nil
}
