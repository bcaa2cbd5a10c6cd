package batches

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// sleepRunner answers every line after a fixed latency, like a fast
// local provider.
type sleepRunner struct{ d time.Duration }

func (s sleepRunner) Run(ctx context.Context, _ Caller, _, _ string, _ http.Header, _ []byte) (int, []byte, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	return 200, []byte(`{"id":"chatcmpl-1","object":"chat.completion"}`), nil
}

// BenchmarkManagedBatch runs a 400-line batch against a runner that
// takes 5 ms per line at the default concurrency of 8 and reports lines
// per second (the ideal is 8/5ms = 1600).
//
//	go test -run '^$' -bench ManagedBatch -benchtime 5x ./batches/
func BenchmarkManagedBatch(b *testing.B) {
	const lines = 400
	e := newEnv(b, Config{})
	e.clock.now = time.Now()
	e.engine.RegisterRunner(testRoute, sleepRunner{5 * time.Millisecond})
	defer e.engine.Stop()
	fid := e.upload(b, chatLines(lines))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		bt, err := e.engine.Create(context.Background(), e.caller, nil,
			[]byte(`{"input_file_id":"`+fid+`","endpoint":"/v1/chat/completions","completion_window":"immediate"}`))
		if err != nil {
			b.Fatal(err)
		}
		for {
			got, _ := e.engine.Get(context.Background(), e.caller.WorkspaceID, bt.ID)
			if Terminal(got.Status) {
				if got.RequestCounts.Completed != lines {
					b.Fatalf("completed %d", got.RequestCounts.Completed)
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(float64(lines*b.N)/time.Since(start).Seconds(), "lines/s")
}
