package budgets

import (
	"strconv"
	"time"
)

// Period is one counting period of a usage limit.
type Period struct {
	// Start and End bound the period (End exclusive); both zero for a
	// limit that never resets.
	Start, End time.Time
	// Label names the period in counter keys ("2026-03", "2026-W14",
	// "all"), so a new period starts new counters at its boundary
	// without a reset job.
	Label string
}

// window is the counter window a period's counters use: longer than any
// period, so nothing a period counted leaves the count before the period
// ends (the label then moves on). A limit without reset keeps its count
// for about a century.
func (p Period) window() time.Duration {
	if p.End.IsZero() {
		return 100 * 365 * 24 * time.Hour
	}
	return 2 * p.End.Sub(p.Start)
}

// PeriodAt returns the period of u that holds now. Boundaries are
// midnight in u's time zone: the first of the month, or Monday for
// weekly limits. They are computed as calendar dates in that zone, so a
// month or week that holds a daylight-saving change is an hour shorter or
// longer in absolute time and still ends at local midnight.
func (u *UsageLimit) PeriodAt(now time.Time) Period {
	loc := u.Location()
	t := now.In(loc)
	switch u.PeriodicReset {
	case ResetMonthly:
		start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		end := time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		return Period{Start: start, End: end, Label: start.Format("2006-01")}
	case ResetWeekly:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start := time.Date(t.Year(), t.Month(), t.Day()-back, 0, 0, 0, 0, loc)
		end := time.Date(start.Year(), start.Month(), start.Day()+7, 0, 0, 0, 0, loc)
		y, w := start.ISOWeek()
		return Period{Start: start, End: end, Label: strconv.Itoa(y) + "-W" + strconv.Itoa(w)}
	}
	return Period{Label: "all"}
}
