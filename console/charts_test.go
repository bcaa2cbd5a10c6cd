package console

import (
	"strings"
	"testing"
	"time"
)

// hours makes n buckets of one hour from 2026-01-01T00:00Z, the i-th with
// reqs(i) requests and a third of them failed.
func hours(n int, length time.Duration, reqs func(int) int64) []bucket {
	var out []bucket
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		r := reqs(i)
		out = append(out, bucket{Time: t0.Add(time.Duration(i) * length).Format(time.RFC3339), Requests: r, Errors: r / 3, Tokens: 10 * r, CostUSD: "0.5"})
	}
	return out
}

// TestChartLayout: each range's buckets become that many bars inside the
// plot, the y axis reaches the busiest bucket with labelled ticks, x
// ticks are labelled by the bucket's unit, and only buckets with traffic
// are focusable, each saying its values.
func TestChartLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		unit   string
		reqs   func(int) int64
		wantX  string // the first x tick's label
		wantY  string // the top y tick's label
		label  string // in the first busy bar's description
		noTabs int    // buckets without traffic
	}{
		{"1h by minutes", 61, "minute", func(i int) int64 { return int64(i % 2 * 7) }, "00:00", "8", "Jan 1 00:01 to 00:02 UTC: 7 requests, 2 errors, 70 tokens, 0.5 USD", 31},
		{"24h by hours", 25, "hour", func(i int) int64 { return int64(i * 40) }, "00:00", "1000", "Jan 1 01:00 to 02:00 UTC: 40 requests, 13 errors", 1},
		{"7d by hours", 169, "hour", func(i int) int64 { return 3 }, "Jan 1 00h", "4", "Jan 1 00:00 to 01:00 UTC: 3 requests, 1 errors", 0},
		{"30d by days", 31, "day", func(i int) int64 { return int64(i) * 1234 }, "Jan 1", "40000", "Jan 2 00:00 to Jan 3 00:00 UTC: 1234 requests", 1},
		{"no traffic", 25, "hour", func(int) int64 { return 0 }, "00:00", "4", "", 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := hours(tc.n, bucketLengths[tc.unit], tc.reqs)
			c := buildChart(bs, tc.unit)
			if len(c.Bars) != tc.n {
				t.Fatalf("%d bars for %d buckets", len(c.Bars), tc.n)
			}
			if !strings.Contains(c.Title, tc.unit) {
				t.Errorf("title %q does not name the bucket %q", c.Title, tc.unit)
			}
			if len(c.XTicks) < 2 || len(c.XTicks) > chartXTicks+1 || c.XTicks[0].Label != tc.wantX {
				t.Errorf("x ticks %+v, want the first %q", c.XTicks, tc.wantX)
			}
			if got := c.YTicks[len(c.YTicks)-1]; got.Label != tc.wantY || got.At != chartTop {
				t.Errorf("top y tick %+v, want %q at %d", got, tc.wantY, chartTop)
			}
			if c.YTicks[0].Label != "0" || c.YTicks[0].At != chartTop+plotH {
				t.Errorf("y axis does not start at 0 on the x axis: %+v", c.YTicks[0])
			}
			empty, first := 0, ""
			for i, b := range c.Bars {
				if b.X < chartLeft || b.X+b.W > chartLeft+plotW || b.Y < chartTop || b.Y+b.H != chartTop+plotH {
					t.Fatalf("bar %d outside the plot: %+v", i, b)
				}
				if b.ErrH > b.H {
					t.Fatalf("bar %d: errors taller than requests", i)
				}
				if !b.Tab {
					empty++
				} else if first == "" {
					first = b.Label
				}
				if b.Tab != (b.Requests > 0) {
					t.Fatalf("bar %d focusable=%v with %d requests", i, b.Tab, b.Requests)
				}
			}
			if empty != tc.noTabs {
				t.Errorf("%d buckets not focusable, want %d", empty, tc.noTabs)
			}
			if !strings.Contains(first, tc.label) {
				t.Errorf("first busy bar says %q, want %q", first, tc.label)
			}
		})
	}
}

// TestNiceStep: the y step is 1, 2, 2.5 or 5 times a power of ten and its
// ticks reach the peak.
func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ peak, want int64 }{{0, 1}, {4, 1}, {5, 2}, {9, 5}, {40, 10}, {41, 20}, {1000, 250}, {49_366, 20_000}} {
		got := niceStep(tc.peak, chartYTicks)
		if got*chartYTicks < tc.peak {
			t.Errorf("peak %d: step %d does not reach it", tc.peak, got)
		}
		if tc.want != 0 && got != tc.want {
			t.Errorf("peak %d: step %d, want %d", tc.peak, got, tc.want)
		}
	}
}

// TestOverviewAsksBucket: each range asks the analytics API for its
// bucket, so 24 hours are hours, not a day in one bar.
func TestOverviewAsksBucket(t *testing.T) {
	for rng, want := range map[string]string{"1h": "bucket=minute", "24h": "bucket=hour", "7d": "bucket=hour", "30d": "bucket=day", "bogus": "bucket=hour"} {
		h, f, _ := newConsole(t)
		id, _ := signIn(t, h, adminKey)
		w := serve(h, "GET", "/?range="+rng, nil, id)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `class="x-axis`) || !strings.Contains(w.Body.String(), `tabindex="0"`) {
			t.Fatalf("%s: %d %s", rng, w.Code, w.Body)
		}
		f.mu.Lock()
		asked := false
		for i, c := range f.calls {
			if strings.HasPrefix(c, "GET /v1/analytics/graphs/requests") && strings.Contains(f.queries[i], want) {
				asked = true
			}
		}
		f.mu.Unlock()
		if !asked {
			t.Errorf("range %s did not ask for %s", rng, want)
		}
	}
}
