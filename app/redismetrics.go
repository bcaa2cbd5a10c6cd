package app

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// Redis metrics. They are created once per process and registered into
// every config's registry, as observe's collectors are, so they stay
// monotonic across reloads. The command label is the Redis command name
// (get, hset, evalsha, …): the set the gateway's own code sends, bounded.
var (
	redisCommandDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "llm_gateway_store_command_duration_seconds",
		Help:    "Time of each command (or pipeline) the gateway sends to its shared Redis store, by command name.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"command"})
	redisCommandErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_store_errors_total",
		Help: "Commands to the shared Redis store that failed (a missing key is no failure), by command name.",
	}, []string{"command"})
)

var redisCollectors = metricset.Declare(redisCommandDuration, redisCommandErrors)

// registerRedisMetrics registers the store collectors into reg, which may
// already hold them from an earlier load.
func registerRedisMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, redisCollectors)
}

// redisMetricsHook times every command and pipeline and counts failures.
type redisMetricsHook struct{}

func (redisMetricsHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			redisCommandErrors.WithLabelValues("dial").Inc()
		}
		return c, err
	}
}

func (redisMetricsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		observeRedis(cmd.Name(), start, err)
		return err
	}
}

func (redisMetricsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		observeRedis("pipeline", start, err)
		return err
	}
}

func observeRedis(name string, start time.Time, err error) {
	redisCommandDuration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, redis.Nil) {
		redisCommandErrors.WithLabelValues(name).Inc()
	}
}
