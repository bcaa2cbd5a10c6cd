package budgets

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// Headers of every webhook call.
const (
	// HeaderTimestamp is when the call was signed, in Unix seconds.
	HeaderTimestamp = "X-Gateway-Timestamp"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256, keyed with the
	// alert secret, of the timestamp, ".", and the body (SignAlert).
	HeaderSignature = "X-Gateway-Signature"
	// HeaderEvent repeats the body's event.
	HeaderEvent = "X-Gateway-Event"
)

// Bounds of the alert webhook: a call's time, the attempts per event
// (retried on a network error, 408, 425, 429 and 5xx, with a pause that
// doubles from a second), how many calls may run at once and how many
// alerts may wait per worker (more are dropped, logged and counted: an
// alert is advisory, and a dead receiver must not pile up memory).
const (
	AlertTimeout   = 5 * time.Second
	AlertAttempts  = 4
	alertWorkers   = 4
	maxAlertQueued = 256
)

// AlertMaxAge is how old a signed timestamp a receiver should accept
// (VerifyAlert): older calls are replays.
const AlertMaxAge = 5 * time.Minute

// alertsTotal counts deliveries by event and outcome (delivered, failed:
// every attempt failed, dropped: the queue was full). Like the gateway's
// other collectors it is created once per process and registered into
// every config's registry, so it stays monotonic across reloads.
var alertsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "llm_gateway_budget_alerts_total",
	Help: "Usage-limit alert webhook events by event (threshold, exhausted, reset) and outcome (delivered, failed, dropped).",
}, []string{"event", "outcome"})

// alertCollectors are the alert metrics, declared once (metricset).
var alertCollectors = metricset.Declare(alertsTotal)

// RegisterAlertMetrics registers the alert collectors into reg (a config's
// registry), which may already hold them from an earlier load.
func RegisterAlertMetrics(reg prometheus.Registerer) error {
	return metricset.Register(reg, alertCollectors)
}

// SignAlert is the x-gateway-signature of body sent at timestamp (Unix
// seconds, as sent in x-gateway-timestamp) with secret.
func SignAlert(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of VerifyAlert.
var (
	ErrAlertSignature = errors.New("budgets: the alert's signature does not match")
	ErrAlertStale     = errors.New("budgets: the alert's timestamp is more than 5 minutes from now")
)

// VerifyAlert checks a received alert as a receiver should: the signature
// over the timestamp and the body as received, compared in constant
// time, and a timestamp within AlertMaxAge of now.
func VerifyAlert(secret []byte, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrAlertStale
	}
	if d := now.Sub(time.Unix(ts, 0)); d > AlertMaxAge || d < -AlertMaxAge {
		return ErrAlertStale
	}
	if !hmac.Equal([]byte(SignAlert(secret, timestamp, body)), []byte(signature)) {
		return ErrAlertSignature
	}
	return nil
}

// alertQueue is the alerter's deliveries: one FIFO per worker, a group's
// alerts always on the same one, so they arrive in order, and a worker
// goroutine only while its queue has work.
type alertQueue struct {
	shards [alertWorkers]alertShard
	wg     sync.WaitGroup
}

type alertShard struct {
	mu      sync.Mutex
	queue   [][]Alert
	running bool
}

// push queues one call's alerts for the group counted at key.
func (q *alertQueue) push(a *Alerter, key string, alerts []Alert) {
	h := fnv.New32a()
	h.Write([]byte(groupOf(key)))
	s := &q.shards[h.Sum32()%alertWorkers]
	s.mu.Lock()
	if len(s.queue) >= maxAlertQueued {
		s.mu.Unlock()
		for _, al := range alerts {
			alertsTotal.WithLabelValues(al.Event, "dropped").Inc()
			a.logger.Warn("usage limit alert dropped: too many alerts waiting for the webhook",
				zap.String("policy_id", al.PolicyID), zap.String("event", al.Event))
		}
		return
	}
	q.wg.Add(1)
	s.queue = append(s.queue, alerts)
	if !s.running {
		s.running = true
		go q.drain(a, s)
	}
	s.mu.Unlock()
}

// drain delivers s's alerts until its queue is empty.
func (q *alertQueue) drain(a *Alerter, s *alertShard) {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		next := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		for _, al := range next {
			a.deliver(al)
		}
		q.wg.Done()
	}
}

// deliver posts al, retrying a failure that may pass, then logs and
// counts one that did not.
func (a *Alerter) deliver(al Alert) {
	body, err := json.Marshal(al)
	if err != nil {
		return
	}
	pause := a.backoff
	for attempt := 1; ; attempt++ {
		status, err := a.post(al.Event, body)
		if err == nil && status < 300 {
			alertsTotal.WithLabelValues(al.Event, "delivered").Inc()
			return
		}
		retry := err != nil || status == http.StatusRequestTimeout || status == http.StatusTooEarly ||
			status == http.StatusTooManyRequests || status >= 500
		if !retry || attempt == AlertAttempts {
			alertsTotal.WithLabelValues(al.Event, "failed").Inc()
			fields := []zap.Field{zap.String("policy_id", al.PolicyID), zap.String("event", al.Event), zap.Int("attempts", attempt)}
			if err != nil {
				fields = append(fields, zap.Error(err))
			} else {
				fields = append(fields, zap.Int("status", status))
			}
			a.logger.Warn("usage limit alert webhook failed", fields...)
			return
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// post makes one signed call and returns the receiver's status.
func (a *Alerter) post(event string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), AlertTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the webhook URL cannot be requested")
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderEvent, event)
	if len(a.secret) > 0 {
		req.Header.Set(HeaderSignature, SignAlert(a.secret, ts, body))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		// The URL may hold the receiver's token: keep the cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, errors.New(strings.ReplaceAll(err.Error(), a.url, "<alert_webhook>"))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}
