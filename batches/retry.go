package batches

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Backoff of storage retries: a store outage pauses a batch, which
// retries each write (and read) after retryMin, doubling up to retryMax,
// until it succeeds or the engine stops. Nothing is reported done that
// storage has not got.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// permanent reports errors a retry cannot fix: a missing key, or an
// answer of the gateway's own (a file over the size limit, a 404).
func permanent(err error) bool {
	var (
		ae *apierror.Error
		se *stopErr
	)
	return errors.Is(err, fs.ErrNotExist) || errors.As(err, &ae) || errors.As(err, &se)
}

// retry runs op with a fresh I/O context until it succeeds, fails
// permanently, or the engine stops (then the last error is returned).
func (e *Engine) retry(batchID, what string, op func(ctx context.Context) error) error {
	wait := retryMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := ioCtx()
		err := op(ctx)
		cancel()
		if err == nil || permanent(err) {
			if err == nil && attempt > 1 {
				e.cfg.Logger.Info("batch: storage back, resumed", zap.String("batch_id", batchID), zap.String("op", what), zap.Int("attempts", attempt))
			}
			return err
		}
		if attempt == 1 {
			e.cfg.Logger.Warn("batch: storage unavailable, batch paused, retrying", zap.String("batch_id", batchID), zap.String("op", what), zap.Error(err))
		}
		select {
		case <-time.After(wait):
		case <-e.ctx.Done():
			return err
		}
		wait = min(2*wait, retryMax)
	}
}
