package semantic

import (
	"container/list"
	"errors"
	"sync"
	"time"
)

// Defaults of Config.
const (
	// DefaultThreshold is the cosine similarity a stored request must
	// reach to answer a new one. Peers' 0.8 makes different questions
	// share answers with small embedding models (wave2.md §5).
	DefaultThreshold = 0.95
	// DefaultMaxBytes is the index's memory budget: about 40,000 entries
	// of 1536 dimensions.
	DefaultMaxBytes = 256 << 20
	// DefaultMaxEntries caps one partition, which also bounds a lookup's
	// exact scan (about 1.5 ms at 1536 dimensions, see the benchmarks).
	DefaultMaxEntries = 10000
	// entryOverhead approximates an entry's bytes besides its vector and
	// key: the entry, its map slot and its list element.
	entryOverhead = 160
	// maxLazyDrops bounds the expired entries one lookup removes.
	maxLazyDrops = 64
)

// Config bounds an Index.
type Config struct {
	// MaxBytes is the memory budget for all partitions; the oldest
	// entries are evicted beyond it. 0 means DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries caps each partition; adding to a full partition drops
	// its expired entries, then its oldest. 0 means DefaultMaxEntries.
	MaxEntries int
	// Now is the clock expiry is checked against; nil means time.Now.
	Now func() time.Time
}

// Index maps embedding vectors to exact-cache keys, per partition, by
// exact (brute-force) cosine search: below the per-partition cap it is
// faster than building a graph index and it never misses a neighbour
// (see the package benchmarks). It is safe for concurrent use; lookups
// run in parallel, holding only a read lock and never across I/O.
type Index struct {
	maxBytes   int64
	maxEntries int
	now        func() time.Time

	mu    sync.RWMutex
	parts map[Partition]*partition
	order *list.List // of *entry, oldest first, across partitions
	bytes int64
	seq   uint64
}

type partition struct {
	id    Partition
	dim   int
	vecs  []float32 // entry i's vector is vecs[i*dim:(i+1)*dim]
	ents  []*entry
	byKey map[string]*entry
}

type entry struct {
	key     string
	expires int64  // unix nanoseconds
	seq     uint64 // when added or refreshed, for oldest-first eviction
	slot    int
	part    *partition
	elem    *list.Element
}

// NewIndex returns an empty index.
func NewIndex(c Config) *Index {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Index{
		maxBytes:   c.MaxBytes,
		maxEntries: c.MaxEntries,
		now:        c.Now,
		parts:      make(map[Partition]*partition),
		order:      list.New(),
	}
}

// EntryBytes is what an entry of dim dimensions and a key of keyLen bytes
// counts against the budget.
func EntryBytes(dim, keyLen int) int64 {
	return int64(dim*4 + keyLen + entryOverhead)
}

// Lookup returns the exact-cache key of the unexpired entry of partition
// p most similar to vec, when its cosine similarity reaches threshold
// (DefaultThreshold when threshold is not in (0, 1]). A vector of another
// dimension than the partition's misses. Expired entries met on the way
// are removed.
func (ix *Index) Lookup(p Partition, vec []float32, threshold float32) (exactKey string, similarity float32, ok bool) {
	if !(threshold > 0 && threshold <= 1) {
		threshold = DefaultThreshold
	}
	q, valid := normalized(vec)
	if !valid {
		return "", 0, false
	}
	now := ix.now().UnixNano()
	var expired []*entry
	best, bestSim := -1, float32(-2)

	ix.mu.RLock()
	pt := ix.parts[p]
	if pt == nil || pt.dim != len(q) {
		ix.mu.RUnlock()
		return "", 0, false
	}
	dim := pt.dim
	for i, e := range pt.ents {
		s := dot(q, pt.vecs[i*dim:(i+1)*dim])
		if s < threshold || s <= bestSim {
			continue
		}
		if e.expires <= now {
			if len(expired) < maxLazyDrops {
				expired = append(expired, e)
			}
			continue
		}
		best, bestSim = i, s
	}
	if best >= 0 {
		exactKey = pt.ents[best].key
	}
	ix.mu.RUnlock()

	if len(expired) > 0 {
		ix.mu.Lock()
		for _, e := range expired {
			// Still indexed and still expired: a concurrent Add may have
			// refreshed or removed it.
			if e.part != nil && e.expires <= now {
				ix.remove(e)
			}
		}
		ix.mu.Unlock()
	}
	if best < 0 {
		return "", 0, false
	}
	return exactKey, bestSim, true
}

// Errors returned by Add.
var (
	ErrBadVector = errors.New("semantic index: vector is empty, zero, too long or not finite")
	ErrTooLarge  = errors.New("semantic index: entry exceeds the memory budget")
)

// Add indexes vec in partition p as pointing at exactKey until expiresAt.
// Adding a key the partition holds replaces its vector and expiry. A
// vector of another dimension than the partition's empties the partition
// first (the embedding model changed; old vectors are not comparable). An
// entry already expired is not added.
func (ix *Index) Add(p Partition, vec []float32, exactKey string, expiresAt time.Time) error {
	v, ok := normalized(vec)
	if !ok {
		return ErrBadVector
	}
	size := EntryBytes(len(v), len(exactKey))
	if size > ix.maxBytes {
		return ErrTooLarge
	}
	now := ix.now().UnixNano()
	exp := expiresAt.UnixNano()
	if exp <= now {
		return nil
	}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	pt := ix.parts[p]
	if pt != nil && pt.dim != len(v) {
		ix.dropPartition(pt)
		pt = nil
	}
	if pt == nil {
		pt = &partition{id: p, dim: len(v), byKey: make(map[string]*entry)}
		ix.parts[p] = pt
	}
	if e := pt.byKey[exactKey]; e != nil {
		copy(pt.vecs[e.slot*pt.dim:], v)
		e.expires = exp
		ix.seq++
		e.seq = ix.seq
		ix.order.MoveToBack(e.elem)
		return nil
	}
	if len(pt.ents) >= ix.maxEntries {
		ix.makeRoom(pt, now)
	}
	ix.seq++
	e := &entry{key: exactKey, expires: exp, seq: ix.seq, slot: len(pt.ents), part: pt}
	pt.ents = append(pt.ents, e)
	pt.vecs = append(pt.vecs, v...)
	pt.byKey[exactKey] = e
	e.elem = ix.order.PushBack(e)
	ix.bytes += size
	for ix.bytes > ix.maxBytes {
		oldest := ix.order.Front().Value.(*entry)
		ix.remove(oldest)
	}
	return nil
}

// Remove drops exactKey from partition p; the cache step calls it when
// the exact entry a semantic hit points at is gone.
func (ix *Index) Remove(p Partition, exactKey string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if pt := ix.parts[p]; pt != nil {
		if e := pt.byKey[exactKey]; e != nil {
			ix.remove(e)
		}
	}
}

// Len returns the number of indexed entries.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.order.Len()
}

// Bytes returns the memory the entries count against the budget.
func (ix *Index) Bytes() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.bytes
}

// makeRoom frees a slot in the full partition pt: its expired entries,
// or else its oldest one. Caller holds the write lock.
func (ix *Index) makeRoom(pt *partition, now int64) {
	var oldest *entry
	for i := len(pt.ents) - 1; i >= 0; i-- {
		e := pt.ents[i]
		if e.expires <= now {
			ix.remove(e)
			continue
		}
		if oldest == nil || e.seq < oldest.seq {
			oldest = e
		}
	}
	if len(pt.ents) >= ix.maxEntries && oldest != nil {
		ix.remove(oldest)
	}
}

// remove unindexes e, keeping the partition's slots dense by moving its
// last entry into e's slot. Caller holds the write lock.
func (ix *Index) remove(e *entry) {
	pt := e.part
	last := len(pt.ents) - 1
	if e.slot != last {
		m := pt.ents[last]
		copy(pt.vecs[e.slot*pt.dim:(e.slot+1)*pt.dim], pt.vecs[last*pt.dim:])
		pt.ents[e.slot] = m
		m.slot = e.slot
	}
	pt.ents[last] = nil
	pt.ents = pt.ents[:last]
	pt.vecs = pt.vecs[:last*pt.dim]
	delete(pt.byKey, e.key)
	ix.order.Remove(e.elem)
	ix.bytes -= EntryBytes(pt.dim, len(e.key))
	e.part = nil
	switch {
	case len(pt.ents) == 0:
		delete(ix.parts, pt.id)
	case cap(pt.ents) > 64 && len(pt.ents) < cap(pt.ents)/4:
		// Give memory back after mass expiry or eviction.
		pt.ents = append([]*entry(nil), pt.ents...)
		pt.vecs = append([]float32(nil), pt.vecs...)
	}
}

// dropPartition removes every entry of pt. Caller holds the write lock.
func (ix *Index) dropPartition(pt *partition) {
	for len(pt.ents) > 0 {
		ix.remove(pt.ents[len(pt.ents)-1])
	}
	delete(ix.parts, pt.id)
}
