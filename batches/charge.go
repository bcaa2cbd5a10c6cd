package batches

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// Each line of a managed batch is charged exactly once, whatever the
// number of times it runs. A line runs twice when the instance running
// its batch dies after the line finished but before its result was
// recorded: the instance that takes the batch over runs it again (at most
// one batch's concurrency of lines). Both runs reach the provider; only
// the first to finish is charged. When a run of a line finishes, the
// gateway claims the line's charge (Charge.Claim) before it records the
// request in the ledger and settles its rate-limit and usage-limit
// reservations: the first claim wins and is charged as any request is;
// a later run of the same line is charged nothing, its reservations are
// given back and it is not written to the ledger (whose unique key on
// batch id and custom_id keeps one record per line even if a claim was
// lost).
//
// The claims live beside the batch: with a Leaser (Redis, a cluster) one
// key per line, written only when its run finished (so a few kilobytes per
// thousand lines), each expiring an hour after the batch's completion
// window ends, when no run of the line can start any more; without one
// (Caddy's storage, a single instance) one record per line under the
// batch's folder, checked and written under the engine's lock and
// deleted when the batch ends.

// chargeGrace is how long a line's claim outlives its batch's
// completion window: a run already in flight on an instance that lost
// the batch may still finish that much later and must find the claim.
const chargeGrace = time.Hour

// Charge identifies one run of a batch line for its accounting. The
// gateway carries it with the line's request (batchRunner) and claims it
// when the request is done.
type Charge struct {
	// BatchID and CustomID name the line; CustomID is the line's
	// custom_id, or when longer than MaxChargeID a digest of it.
	BatchID, CustomID string
	claim             func(ctx context.Context) (bool, error)
}

// MaxChargeID is the longest custom_id a Charge carries as it is; a
// longer one is replaced by "sha256:" and its digest, so ledger keys and
// claim keys stay bounded whatever a batch's input holds.
const MaxChargeID = 128

// Claim records that this run charges the line. It returns false when
// another run of the line claimed it first: this run must charge nothing.
// A claim made again by the same run is still its own (true). An error
// means the claim could not be recorded (the store is down): the caller
// charges the run, as the safer mistake, and the ledger's unique key still
// keeps one record.
func (c *Charge) Claim(ctx context.Context) (bool, error) {
	if c == nil || c.claim == nil {
		return true, nil
	}
	return c.claim(ctx)
}

type chargeKey struct{}

// withCharge returns ctx carrying c, for the runner of the line.
func withCharge(ctx context.Context, c *Charge) context.Context {
	return context.WithValue(ctx, chargeKey{}, c)
}

// ChargeOf returns the Charge of the batch line whose run ctx belongs
// to (the context a Runner is called with), nil for any other context.
func ChargeOf(ctx context.Context) *Charge {
	c, _ := ctx.Value(chargeKey{}).(*Charge)
	return c
}

// chargeID is the bounded form of a custom_id (see MaxChargeID).
func chargeID(cid string) string {
	if len(cid) <= MaxChargeID {
		return cid
	}
	sum := sha256.Sum256([]byte(cid))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// chargesDir is the folder of batch id's claims.
func (e *Engine) chargesDir(ws, id string) string {
	return files.WorkspaceDir(e.cfg.Prefix, ws) + "/" + id + ".charges"
}

// chargeFor returns the Charge of one run of line cid of j.
func (e *Engine) chargeFor(j *job, cid string) *Charge {
	e.mu.Lock()
	ws, id, expires := j.rec.Caller.WorkspaceID, j.rec.Batch.ID, *j.rec.Batch.ExpiresAt
	e.mu.Unlock()
	sum := sha256.Sum256([]byte(cid))
	key := e.chargesDir(ws, id) + "/" + hex.EncodeToString(sum[:16])
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	run := e.cfg.Instance + "/" + hex.EncodeToString(nonce[:])
	return &Charge{BatchID: id, CustomID: chargeID(cid), claim: func(ctx context.Context) (bool, error) {
		return e.claimCharge(ctx, key, run, expires)
	}}
}

// claimCharge claims key for run; see Charge.Claim.
func (e *Engine) claimCharge(ctx context.Context, key, run string, expires int64) (bool, error) {
	if l := e.leaser(); l != nil {
		ttl := time.Until(time.Unix(expires, 0)) + chargeGrace
		return l.Claim(ctx, key, run, max(ttl, chargeGrace))
	}
	// One instance: the lock makes the check and the write one step.
	e.chargeMu.Lock()
	defer e.chargeMu.Unlock()
	v, err := e.cfg.KV.Load(ctx, key)
	switch {
	case err == nil:
		return string(v) == run, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := e.cfg.KV.Store(ctx, key, []byte(run)); err != nil {
		return false, err
	}
	return true, nil
}

// dropCharges deletes the claims of a batch that ended, when they are
// records of the store (without a Leaser); with one they expire.
func (e *Engine) dropCharges(ws, id string) {
	if e.leaser() != nil {
		return
	}
	ctx, cancel := ioCtx()
	defer cancel()
	keys, err := files.ListKeys(ctx, e.cfg.KV, e.chargesDir(ws, id), false)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.cfg.Logger.Warn("batch: listing line charges", zap.String("batch_id", id), zap.Error(err))
		}
		return
	}
	for _, k := range keys {
		_ = e.cfg.KV.Delete(ctx, k)
	}
	_ = e.cfg.KV.Delete(ctx, e.chargesDir(ws, id))
}
