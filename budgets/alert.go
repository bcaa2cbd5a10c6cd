package budgets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
)

// Events of the alert webhook: a limit's group passed its alert
// threshold, or reached its credit limit, in a period (each once per
// group and period); or a new period began for a group that had alerted
// in the one before (once).
const (
	EventThreshold = "threshold"
	EventExhausted = "exhausted"
	EventReset     = "reset"
)

// SweepEvery is how often an alerter looks for periods that ended (their
// reset events).
const SweepEvery = time.Second

// resetOnceTTL is how long a sent reset is remembered: far longer than a
// mark outlives its sweep.
const resetOnceTTL = 31 * 24 * time.Hour

// Alert is the body the webhook receives.
type Alert struct {
	// ID names the event: the same on every attempt to deliver it, so a
	// receiver can drop a retried delivery it already has.
	ID             string   `json:"id"`
	Event          string   `json:"event"`
	PolicyID       string   `json:"policy_id"`
	Name           *string  `json:"name"`
	Type           string   `json:"type"`
	CreditLimit    float64  `json:"credit_limit"`
	AlertThreshold *float64 `json:"alert_threshold"`
	// Used is what the group used in the period, in the limit's unit;
	// null on reset.
	Used *float64 `json:"used"`
	// Group is the counter's group (the limit id and its group_by
	// values); one group's events share it across periods.
	Group          string `json:"group"`
	PeriodStart    string `json:"period_start,omitempty"`
	PeriodEnd      string `json:"period_end,omitempty"`
	WorkspaceID    string `json:"workspace_id"`
	OrganisationID string `json:"organisation_id"`
}

// Alerter posts a limit's events (threshold, exhausted, reset) to a
// webhook, each once per group and period across the instances that share
// its Once, signed with its secret (SignAlert). Deliveries run in the
// background, bounded: alertWorkers at once, each event retried a few
// times with backoff, a bounded queue (alertsend.go).
type Alerter struct {
	url    string
	client *http.Client
	once   Once
	marks  Marks
	secret []byte
	now    func() time.Time
	logger *zap.Logger
	// backoff is the pause before the first retry, doubled each time.
	backoff time.Duration
	queue   alertQueue
	warn    logthrottle.Throttle
}

// AlertOption configures an Alerter.
type AlertOption func(*Alerter)

// WithSecret signs every call with secret (x-gateway-signature). The llm
// app always sets one.
func WithSecret(secret []byte) AlertOption {
	return func(a *Alerter) { a.secret = append([]byte(nil), secret...) }
}

// WithMarks remembers the groups that alerted in m, so Run sends their
// reset events when their period ends (none without).
func WithMarks(m Marks) AlertOption { return func(a *Alerter) { a.marks = m } }

// WithClock tells the end of periods with now (default time.Now). The
// signature's timestamp is always the wall clock a receiver compares it to.
func WithClock(now func() time.Time) AlertOption { return func(a *Alerter) { a.now = now } }

// NewAlerter returns an alerter posting to url with client (which should
// be egress-checked: guardrails.NewEgressClient), deduplicated by once.
func NewAlerter(url string, client *http.Client, once Once, logger *zap.Logger, opts ...AlertOption) *Alerter {
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Alerter{url: url, client: client, once: once, logger: logger, now: time.Now, backoff: time.Second}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Fire posts the events g's period has become due for at used (the
// period's spend, in counter units): threshold once used reaches the
// limit's alert threshold, exhausted once it reaches the limit, each
// unless it was already sent for the period. One call's events are
// delivered in order, after the group's earlier ones.
func (a *Alerter) Fire(ctx context.Context, g *Grant, used int64) {
	u := g.Limit
	key := unitless(g.Key)
	var due []Alert
	for _, ev := range []string{EventThreshold, EventExhausted} {
		if ev == EventThreshold && (u.thresholdAt() == 0 || used < u.thresholdAt()) || ev == EventExhausted && used < u.Limit() {
			continue
		}
		first, err := a.once.First(ctx, ev+"|"+key, g.Period.window())
		if err != nil {
			a.storeFailed(err)
			return
		}
		if first {
			due = append(due, alertOf(ev, g, used))
		}
	}
	if len(due) == 0 {
		return
	}
	if a.marks != nil && !g.Period.End.IsZero() {
		m := AlertMark{Key: key, Alert: due[0], Reset: u.PeriodicReset, Timezone: u.Timezone, End: g.Period.End}
		m.Alert.ID, m.Alert.Event, m.Alert.Used = "", "", nil // one mark for both events
		if err := a.marks.Add(ctx, m); err != nil {
			a.logger.Warn("usage limit alert: its reset event will not be sent", zap.String("policy_id", u.ID), zap.Error(err))
		}
	}
	a.queue.push(a, key, due)
}

// alertOf is the ev alert of g's period at used.
func alertOf(ev string, g *Grant, used int64) Alert {
	u := g.Limit
	v := inUnit(u, used)
	key := unitless(g.Key)
	al := Alert{ID: eventID(ev, key), Event: ev, PolicyID: u.ID, Name: u.Name, Type: u.Type, CreditLimit: u.CreditLimit,
		AlertThreshold: u.AlertThreshold, Used: &v, Group: groupOf(key), WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID}
	if !g.Period.End.IsZero() {
		al.PeriodStart, al.PeriodEnd = g.Period.Start.Format(time.RFC3339), g.Period.End.Format(time.RFC3339)
	}
	return al
}

// groupOf is a counter key (unitless) without the package's prefix and
// the period's label.
func groupOf(key string) string {
	key = strings.TrimPrefix(key, keyPrefix)
	if i := strings.LastIndexByte(key, '|'); i >= 0 {
		key = key[:i]
	}
	return key
}

// eventID names the ev event of the period counted at key.
func eventID(ev, key string) string {
	h := sha256.Sum256([]byte(ev + "|" + key))
	return hex.EncodeToString(h[:16])
}

// Run sends the reset events of periods that ended, looking every
// SweepEvery until ctx ends. Without marks it returns at once.
func (a *Alerter) Run(ctx context.Context) {
	if a.marks == nil {
		return
	}
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.sweep(ctx)
		}
	}
}

// sweep sends the reset of every mark whose period ended, once across the
// instances (any of them may find it first), and forgets the mark.
func (a *Alerter) sweep(ctx context.Context) {
	marks, err := a.marks.Due(ctx, a.now(), 100)
	if err != nil {
		a.storeFailed(err)
		return
	}
	for _, m := range marks {
		first, err := a.once.First(ctx, EventReset+"|"+m.Key, resetOnceTTL)
		if err != nil {
			// The mark stays for the next sweep.
			a.storeFailed(err)
			return
		}
		if first {
			a.queue.push(a, m.Key, []Alert{resetOf(m)})
		}
		if err := a.marks.Remove(ctx, m); err != nil {
			a.storeFailed(err)
		}
	}
}

// resetOf is the reset event of the period after m's.
func resetOf(m AlertMark) Alert {
	u := &UsageLimit{PeriodicReset: m.Reset}
	if m.Timezone != "" {
		if loc, err := time.LoadLocation(m.Timezone); err == nil {
			u.loc = loc
		}
	}
	// End is exclusive: the period holding it is the next one.
	per := u.PeriodAt(m.End)
	al := m.Alert
	al.ID, al.Event, al.Used = eventID(EventReset, m.Key), EventReset, nil
	if !per.End.IsZero() {
		al.PeriodStart, al.PeriodEnd = per.Start.Format(time.RFC3339), per.End.Format(time.RFC3339)
	}
	return al
}

// storeFailed logs that the shared store did not answer, at most every
// 10 s: alerts are advisory, and the store's own warnings say more.
func (a *Alerter) storeFailed(err error) {
	if ok, held := a.warn.Allow(time.Now(), 10*time.Second); ok {
		a.logger.Warn("usage limit alerts: the shared store did not answer; alerts may be late or missed",
			zap.Error(err), zap.Int64("suppressed_since_last", held))
	}
}

// Wait waits for the alert deliveries queued and in flight (tests,
// shutdown).
func (a *Alerter) Wait() { a.queue.wg.Wait() }
