package budgets

import (
	"testing"
	"time"
)

func TestPeriodsFollowTheLocalCalendarAcrossDST(t *testing.T) {
	ams, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	monthly := &UsageLimit{PeriodicReset: ResetMonthly, loc: ams}
	weekly := &UsageLimit{PeriodicReset: ResetWeekly, loc: ams}
	utcMonthly := &UsageLimit{PeriodicReset: ResetMonthly}
	for _, tc := range []struct {
		name       string
		u          *UsageLimit
		now        time.Time
		start, end time.Time
		label      string
	}{
		// Summer time starts 2026-03-29 02:00 CET: March is an hour
		// short, and April starts at 00:00 CEST (22:00 UTC).
		{"march, before the change", monthly, time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
			time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC), "2026-03"},
		{"march, after the change", monthly, time.Date(2026, 3, 31, 21, 59, 59, 0, time.UTC),
			time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC), "2026-03"},
		{"first instant of april local", monthly, time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC),
			time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC), time.Date(2026, 4, 30, 22, 0, 0, 0, time.UTC), "2026-04"},
		{"utc month", utcMonthly, time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC),
			time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), "2026-03"},
		// The week of the change: Monday 2026-03-23 00:00 CET to Monday
		// 2026-03-30 00:00 CEST, 167 hours.
		{"week holding the change", weekly, time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC),
			time.Date(2026, 3, 22, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), "2026-W13"},
		{"sunday night local is still that week", weekly, time.Date(2026, 3, 29, 21, 59, 0, 0, time.UTC),
			time.Date(2026, 3, 22, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), "2026-W13"},
		{"monday local starts the next", weekly, time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC),
			time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), time.Date(2026, 4, 5, 22, 0, 0, 0, time.UTC), "2026-W14"},
		// Winter time returns 2026-10-25: October is an hour long.
		{"october", monthly, time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 9, 30, 22, 0, 0, 0, time.UTC), time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC), "2026-10"},
		{"no reset", &UsageLimit{PeriodicReset: ResetNone}, time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC),
			time.Time{}, time.Time{}, "all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.u.PeriodAt(tc.now)
			if !p.Start.Equal(tc.start) || !p.End.Equal(tc.end) || p.Label != tc.label {
				t.Errorf("period %v – %v %q, want %v – %v %q", p.Start.UTC(), p.End.UTC(), p.Label, tc.start, tc.end, tc.label)
			}
			if !p.End.IsZero() && (tc.now.Before(p.Start) || !tc.now.Before(p.End)) {
				t.Errorf("%v is outside its own period", tc.now)
			}
		})
	}
}
