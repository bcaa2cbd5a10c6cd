package ledger

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// The names a record carries (its key, workspace, organisation, virtual
// key, config, provider, model and cache state) are few and repeat in
// every record, so the records hold numbers instead: each distinct name
// is a row of the dictionary llm_ledger_dim (migration 8), shared by
// every kind of name and by every instance writing the database. Rows
// and the indexes on them then hold integers: an index entry compares as
// a number instead of as text (a fifth of the embedded writer's CPU was
// SQLite comparing text keys), and a number binds without the copy a
// string takes. Queries name a value through the dictionary
// (dimEq, dimIn) and read it back the same way (dimName).

// dimCacheMax bounds the names a DB keeps in memory: past it the cache
// starts again empty. Names are bounded by configuration (keys,
// workspaces, providers), except models, which clients choose.
const dimCacheMax = 1 << 16

// dimColumns are the record's coded columns, in the order recordDims
// returns their names.
var dimColumns = [nDims]string{"key_d", "workspace_d", "organisation_d", "virtual_key_d", "config_d",
	"provider_d", "model_d", "cache_state_d"}

const nDims = 8

// recordDims are r's coded names, in dimColumns' order.
func recordDims(r *Record) [nDims]string {
	return [nDims]string{r.APIKey, r.Workspace, r.Organisation, r.VirtualKey, r.ConfigID, r.Provider, r.Model, r.CacheState}
}

// dimCache is a DB's copy of the dictionary entries its writer used.
// Only committed entries are in it: an entry made in a transaction that
// rolled back does not exist.
type dimCache struct {
	mu  sync.Mutex
	ids map[string]int64
}

// learn adds entries committed by a transaction.
func (c *dimCache) learn(fresh map[string]int64) {
	if len(fresh) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids)+len(fresh) > dimCacheMax {
		c.ids = make(map[string]int64, len(fresh))
	}
	for v, id := range fresh {
		c.ids[v] = id
	}
}

// batchDims are the dictionary ids of every name a batch uses, and those
// the batch's transaction added (learnt once it commits).
type batchDims struct {
	ids   map[string]int64
	fresh map[string]int64
}

// id is the dictionary id of v, which resolve saw.
func (b *batchDims) id(v string) int64 { return b.ids[v] }

// resolve finds the ids of every name recs use: from the cache, and for
// the others from the dictionary within w, adding those it lacks. A name
// is added by every writer the same way (ON CONFLICT DO NOTHING, then
// read back), in sorted order, so instances adding names together cannot
// deadlock and agree on each id.
func (s *DB) resolve(ctx context.Context, w txWriter, recs []Record, into *batchDims) error {
	if into.ids == nil {
		into.ids = make(map[string]int64, 16)
	}
	// A name seen and not in the cache is 0 in into.ids until the
	// dictionary answers (its ids start at 1).
	var missing []string
	s.dims.mu.Lock()
	for i := range recs {
		for _, v := range recordDims(&recs[i]) {
			if _, ok := into.ids[v]; ok {
				continue
			}
			id, ok := s.dims.ids[v]
			if !ok {
				missing = append(missing, v)
			}
			into.ids[v] = id
		}
	}
	s.dims.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	if into.fresh == nil {
		into.fresh = make(map[string]int64, len(missing))
	}
	for start := 0; start < len(missing); start += maxChunk {
		part := missing[start:min(start+maxChunk, len(missing))]
		args := make([]any, len(part))
		for i, v := range part {
			args[i] = v
		}
		marks := strings.TrimSuffix(strings.Repeat("(?), ", len(part)), ", ")
		if err := w.execSQL(ctx, "INSERT INTO llm_ledger_dim (value) VALUES "+marks+" ON CONFLICT (value) DO NOTHING", args...); err != nil {
			return err
		}
		err := w.query(ctx, "SELECT id, value FROM llm_ledger_dim WHERE value IN ("+placeholders(len(part))+")", args,
			func(id int64, v string) {
				into.ids[v] = id
				into.fresh[v] = id
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// placeholders is n comma-separated ? marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// dimEq is the condition that coded column col names v.
func dimEq(col string) string {
	return col + " = (SELECT id FROM llm_ledger_dim WHERE value = ?)"
}

// dimIn is the condition that coded column col names one of n values.
func dimIn(col string, n int) string {
	return col + " IN (SELECT id FROM llm_ledger_dim WHERE value IN (" + placeholders(n) + "))"
}

// dimName is the expression of the name coded column col of table holds.
func dimName(table, col string) string {
	return "(SELECT value FROM llm_ledger_dim WHERE id = " + table + "." + col + ")"
}
