package policies

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// step is one call in a limiter scenario at offset `at` from t0.
type step struct {
	at     time.Duration
	limit  int64
	window time.Duration
	cost   int64 // Admit cost, or Adjust delta when adjust is set
	adjust bool
	want   Decision // Limit is filled from limit; ignored for adjust
}

const (
	min1  = time.Minute
	hour1 = time.Hour
	day1  = 24 * time.Hour
)

func admit(at time.Duration, limit int64, w time.Duration, cost int64, allowed bool, remaining int64, reset, retry time.Duration) step {
	return step{at: at, limit: limit, window: w, cost: cost,
		want: Decision{Allowed: allowed, Limit: limit, Remaining: remaining, ResetAfter: reset, RetryAfter: retry}}
}

func adjust(at time.Duration, limit int64, w time.Duration, delta int64) step {
	return step{at: at, limit: limit, window: w, cost: delta, adjust: true}
}

const sec = time.Second

// limiterScenarios are the window arithmetic tables. With W=1m and 60
// buckets, a unit spent at s leaves the window at (floor(s)+1s)+60s.
var limiterScenarios = []struct {
	name  string
	steps []step
}{
	{"boundary burst: L just before W, nothing more just after", []step{
		admit(59500*time.Millisecond, 10, min1, 10, true, 0, 60500*time.Millisecond, 0),
		// A fixed window would admit 10 again here; the sliding window has
		// nothing decayed yet (the 10 units are 1s old).
		admit(60500*time.Millisecond, 10, min1, 1, false, 0, 59500*time.Millisecond, 59500*time.Millisecond),
		admit(119900*time.Millisecond, 10, min1, 1, false, 0, 100*time.Millisecond, 100*time.Millisecond),
		admit(120*sec, 10, min1, 10, true, 0, 61*sec, 0),
	}},
	{"no refill while spent: keeping pace after a burst is refused", []step{
		admit(0, 10, min1, 10, true, 0, 61*sec, 0),
		admit(6*sec, 10, min1, 1, false, 0, 55*sec, 55*sec),
		admit(30*sec, 10, min1, 1, false, 0, 31*sec, 31*sec),
		admit(54*sec, 10, min1, 1, false, 0, 7*sec, 7*sec),
		admit(61*sec, 10, min1, 1, true, 9, 61*sec, 0),
	}},
	{"sliding window frees the oldest bucket first", []step{
		admit(0, 10, min1, 5, true, 5, 61*sec, 0),
		admit(30*sec, 10, min1, 5, true, 0, 61*sec, 0),
		admit(59*sec, 10, min1, 1, false, 0, 32*sec, 2*sec),
		admit(61*sec, 10, min1, 5, true, 0, 61*sec, 0),
		admit(62*sec, 10, min1, 1, false, 0, 60*sec, 29*sec),
	}},
	{"remaining and reset", []step{
		admit(0, 100, min1, 30, true, 70, 61*sec, 0),
		admit(10500*time.Millisecond, 100, min1, 20, true, 50, 60500*time.Millisecond, 0),
		admit(20*sec, 100, min1, 0, true, 50, 51*sec, 0),
	}},
	{"retry after waits for enough units to free", []step{
		admit(0, 100, min1, 60, true, 40, 61*sec, 0),
		admit(20*sec, 100, min1, 40, true, 0, 61*sec, 0),
		admit(30*sec, 100, min1, 50, false, 0, 51*sec, 31*sec),
		admit(30*sec, 100, min1, 70, false, 0, 51*sec, 51*sec),
		admit(61*sec, 100, min1, 50, true, 10, 61*sec, 0),
	}},
	{"cost above limit never fits", []step{
		admit(0, 10, min1, 11, false, 10, 0, min1),
		admit(0, 10, min1, 10, true, 0, 61*sec, 0),
		admit(sec, 10, min1, 11, false, 0, 60*sec, min1),
	}},
	{"cost 0 probes without consuming", []step{
		admit(0, 5, min1, 0, true, 5, 0, 0),
		admit(0, 5, min1, 5, true, 0, 61*sec, 0),
		admit(10*sec, 5, min1, 0, false, 0, 51*sec, 51*sec),
	}},
	{"adjust charge pushes over the limit", []step{
		admit(0, 100, min1, 50, true, 50, 61*sec, 0),
		adjust(5*sec, 100, min1, 80),
		admit(6*sec, 100, min1, 1, false, 0, 60*sec, 55*sec),
		admit(61*sec, 100, min1, 20, true, 0, 61*sec, 0),
		admit(61*sec, 100, min1, 1, false, 0, 61*sec, 5*sec),
	}},
	{"adjust refund returns budget at once", []step{
		admit(0, 100, min1, 100, true, 0, 61*sec, 0),
		adjust(10*sec, 100, min1, -60),
		admit(10*sec, 100, min1, 60, true, 0, 61*sec, 0),
		admit(10*sec, 100, min1, 1, false, 0, 61*sec, 51*sec),
	}},
	{"refund cancels the oldest units", []step{
		admit(0, 100, min1, 30, true, 70, 61*sec, 0),
		admit(10*sec, 100, min1, 30, true, 40, 61*sec, 0),
		adjust(20*sec, 100, min1, -40),
		admit(20*sec, 100, min1, 0, true, 80, 51*sec, 0),
		admit(20*sec, 100, min1, 100, false, 80, 51*sec, 51*sec),
	}},
	{"refund floors at zero and refund of an absent key is a no-op", []step{
		adjust(0, 10, min1, -5),
		admit(0, 10, min1, 0, true, 10, 0, 0),
		admit(0, 10, min1, 4, true, 6, 61*sec, 0),
		adjust(sec, 10, min1, -1000),
		admit(sec, 10, min1, 10, true, 0, 61*sec, 0),
	}},
	{"adjust on an absent key charges it", []step{
		adjust(0, 10, min1, 12),
		admit(30*sec, 10, min1, 1, false, 0, 31*sec, 31*sec),
	}},
	{"rph window", []step{
		admit(0, 10, hour1, 10, true, 0, 61*min1, 0),
		admit(30*min1, 10, hour1, 1, false, 0, 31*min1, 31*min1),
		admit(60*min1+59*sec, 10, hour1, 1, false, 0, sec, sec),
		admit(61*min1, 10, hour1, 10, true, 0, 61*min1, 0),
	}},
	{"rpd window", []step{
		admit(0, 1000, day1, 1000, true, 0, day1+24*min1, 0),
		admit(23*hour1, 1000, day1, 1, false, 0, hour1+24*min1, hour1+24*min1),
		admit(day1+24*min1, 1000, day1, 1000, true, 0, day1+24*min1, 0),
	}},
	{"retuned limit applies to existing usage", []step{
		admit(0, 10, min1, 10, true, 0, 61*sec, 0),
		admit(sec, 20, min1, 10, true, 0, 61*sec, 0),
		admit(2*sec, 20, min1, 1, false, 0, 60*sec, 59*sec),
		admit(3*sec, 5, min1, 1, false, 0, 59*sec, 59*sec),
		admit(61*sec, 5, min1, 1, false, 0, sec, sec),
		admit(62*sec, 5, min1, 5, true, 0, 61*sec, 0),
	}},
	{"retuned window rpm to rph keeps usage", []step{
		admit(0, 10, min1, 10, true, 0, 61*sec, 0),
		admit(30*sec, 10, hour1, 1, false, 0, hour1+30*sec, hour1+30*sec),
	}},
	{"retuned window rph to rpm re-buckets conservatively", []step{
		admit(0, 10, hour1, 10, true, 0, 61*min1, 0),
		admit(30*sec, 10, min1, 1, false, 0, 61*sec, 61*sec),
		admit(91*sec, 10, min1, 10, true, 0, 61*sec, 0),
	}},
}

func TestLimiterScenarios(t *testing.T) {
	for _, kind := range limiterKinds() {
		t.Run(kind.name, func(t *testing.T) {
			for _, sc := range limiterScenarios {
				t.Run(sc.name, func(t *testing.T) {
					clock := newFakeClock()
					l := kind.make(t, clock)
					ctx := context.Background()
					for i, s := range sc.steps {
						clock.Set(t0.Add(s.at))
						if s.adjust {
							if err := l.Adjust(ctx, "k", s.limit, s.window, s.cost); err != nil {
								t.Fatalf("step %d: Adjust: %v", i, err)
							}
							continue
						}
						d, err := l.Admit(ctx, "k", s.limit, s.window, s.cost)
						if err != nil {
							t.Fatalf("step %d: Admit: %v", i, err)
						}
						if d != s.want {
							t.Errorf("step %d at %v: Admit(cost %d, limit %d, window %v)\n got %+v\nwant %+v",
								i, s.at, s.cost, s.limit, s.window, d, s.want)
						}
					}
				})
			}
		})
	}
}

func TestLimiterInvalidArguments(t *testing.T) {
	for _, kind := range limiterKinds() {
		t.Run(kind.name, func(t *testing.T) {
			l := kind.make(t, newFakeClock())
			ctx := context.Background()
			cases := []struct {
				name   string
				key    string
				limit  int64
				window time.Duration
				cost   int64
			}{
				{"empty key", "", 1, min1, 1},
				{"zero limit", "k", 0, min1, 1},
				{"negative limit", "k", -1, min1, 1},
				{"window below 1ms", "k", 1, time.Microsecond, 1},
				{"negative cost", "k", 1, min1, -1},
			}
			for _, c := range cases {
				if _, err := l.Admit(ctx, c.key, c.limit, c.window, c.cost); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("Admit %s: err = %v, want ErrInvalidArgument", c.name, err)
				}
				if c.cost >= 0 {
					if err := l.Adjust(ctx, c.key, c.limit, c.window, 1); !errors.Is(err, ErrInvalidArgument) {
						t.Errorf("Adjust %s: err = %v, want ErrInvalidArgument", c.name, err)
					}
				}
			}
		})
	}
}

// TestLimiterNeverExceedsLimitInAnyWindow drives random traffic and checks
// the package's guarantee against an exact log: the units admitted in any
// closed interval of length W never exceed L, and a refusal is never worse
// than an exact sliding window of length W+W/N would give.
func TestLimiterNeverExceedsLimitInAnyWindow(t *testing.T) {
	for _, kind := range limiterKinds() {
		t.Run(kind.name, func(t *testing.T) {
			const limit = 20
			window := 10 * time.Second
			width := window / DefaultBuckets
			clock := newFakeClock()
			clock.Advance(1234567 * time.Microsecond) // not aligned to buckets
			l := kind.make(t, clock)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(1, 2))
			type ev struct {
				at   time.Time
				cost int64
			}
			var log []ev
			inRange := func(from, to time.Time) (n int64) {
				for _, e := range log {
					if !e.at.Before(from) && !e.at.After(to) {
						n += e.cost
					}
				}
				return n
			}
			steps := 1500
			if kind.name == "redis" {
				steps = 600
			}
			refused := 0
			for i := 0; i < steps; i++ {
				clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
				if rng.IntN(25) == 0 { // quiet spells let the window drain
					clock.Advance(time.Duration(rng.IntN(12000)) * time.Millisecond)
				}
				now := clock.Now()
				cost := int64(1 + rng.IntN(6))
				d, err := l.Admit(ctx, "prop", limit, window, cost)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					log = append(log, ev{now, cost})
					if got := inRange(now.Add(-window), now); got > limit {
						t.Fatalf("step %d: %d units admitted in [%v, %v], limit %d", i, got, now.Add(-window), now, limit)
					}
				} else if refused++; inRange(now.Add(-window-width), now)+cost <= limit {
					t.Fatalf("step %d: refused cost %d that fits even the last W+W/N", i, cost)
				}
			}
			if len(log) < steps/10 || refused < steps/10 {
				t.Fatalf("%d admissions and %d refusals in %d steps; the test exercises too little", len(log), refused, steps)
			}
		})
	}
}

func TestSettleDelta(t *testing.T) {
	at := t0
	cases := []struct {
		name           string
		reserved, used int64
		elapsed        time.Duration
		want           int64
	}{
		{"exact", 100, 100, sec, 0},
		{"overshoot is charged", 100, 130, sec, 30},
		{"overshoot is charged after the window too", 100, 130, 2 * min1, 30},
		{"unused is refunded within the window", 100, 40, sec, -60},
		{"no refund once the reservation left the window", 100, 40, min1, 0},
	}
	for _, c := range cases {
		if got := SettleDelta(c.reserved, c.used, at, at.Add(c.elapsed), min1); got != c.want {
			t.Errorf("%s: SettleDelta = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	cases := [][3]int64{{7, 2, 3}, {-7, 2, -4}, {-6, 2, -3}, {0, 5, 0}, {-1, 60, -1}}
	for _, c := range cases {
		if got := floorDiv(c[0], c[1]); got != c[2] {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
