package console

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// The overview's chart: a bar per time bucket, drawn on the server as SVG
// with its axes, tick labels and title, so it needs no script and no
// style beyond the console's stylesheet (the CSP is unchanged). Each
// bucket carries its values in a <title> (shown on hover) and, when it
// has traffic, is a focusable element whose aria-label says the same, so
// a keyboard or screen-reader user reads what a mouse user hovers.

// Chart geometry, in SVG user units: the plot sits inside margins that
// hold the title (top), the y labels (left) and the x labels (bottom).
const (
	chartW, chartH                     = 720, 240
	chartLeft, chartRight              = 64, 12
	chartTop, chartBottom              = 28, 40
	plotW                              = chartW - chartLeft - chartRight
	plotH                              = chartH - chartTop - chartBottom
	chartYTicks                        = 4
	chartXTicks                        = 6
	chartYLabelX, chartXLabelY, titleY = chartLeft - 6, chartH - chartBottom + 16, 16
)

// rangeBuckets is the bucket each overview range asks the analytics API
// for (its ?bucket=): minutes over an hour, hours over a day and a week,
// days over a month, so no range puts a day into one bar below 30 days.
var rangeBuckets = map[string]string{"1h": "minute", "24h": "hour", "7d": "hour", "30d": "day"}

// bucketLengths are the lengths of rangeBuckets' names.
var bucketLengths = map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

// chartTick is one labelled tick of an axis: its position along the
// axis and its label.
type chartTick struct {
	At    int
	Label string
}

// chartBar is one bucket of the chart: its bar (requests), the part of
// it that failed (errors), a hit area the whole plot's height (so an
// empty bucket still shows its values on hover) and its description.
type chartBar struct {
	X, W     int
	Y, H     int
	ErrY     int
	ErrH     int
	Label    string
	Tab      bool
	Requests int64
}

// chart is everything the overview template draws.
type chart struct {
	W, H, Left, Top, PlotW, PlotH, Bottom, Right int
	YLabelX, XLabelY, TitleY                     int
	Title                                        string
	YTicks, XTicks                               []chartTick
	Bars                                         []chartBar
}

// buildChart lays out the buckets (bucket long each) as bars on axes
// scaled to the busiest bucket.
func buildChart(bs []bucket, unit string) *chart {
	c := &chart{W: chartW, H: chartH, Left: chartLeft, Top: chartTop, PlotW: plotW, PlotH: plotH,
		Bottom: chartTop + plotH, Right: chartLeft + plotW, YLabelX: chartYLabelX, XLabelY: chartXLabelY, TitleY: titleY,
		Title: "Requests per " + unit + " (UTC)"}
	var peak int64
	for _, b := range bs {
		peak = max(peak, b.Requests)
	}
	step := niceStep(peak, chartYTicks)
	top := step * chartYTicks
	for i := 0; i <= chartYTicks; i++ {
		v := step * int64(i)
		c.YTicks = append(c.YTicks, chartTick{At: chartTop + plotH - int(v*plotH/top), Label: strconv.FormatInt(v, 10)})
	}
	n := len(bs)
	if n == 0 {
		return c
	}
	length := bucketLengths[unit]
	every := max(1, (n+chartXTicks-1)/chartXTicks)
	for i, b := range bs {
		x0, x1 := chartLeft+i*plotW/n, chartLeft+(i+1)*plotW/n
		bar := chartBar{X: x0, W: max(1, x1-x0-1), Requests: b.Requests, Tab: b.Requests > 0}
		bar.H = int(b.Requests * plotH / top)
		bar.Y = chartTop + plotH - bar.H
		bar.ErrH = int(min(b.Errors, b.Requests) * plotH / top)
		bar.ErrY = chartTop + plotH - bar.ErrH
		start, err := time.Parse(time.RFC3339, b.Time)
		if err != nil {
			bar.Label = fmt.Sprintf("%s: %d requests", b.Time, b.Requests)
		} else {
			bar.Label = fmt.Sprintf("%s to %s UTC: %d requests, %d errors, %d tokens, %s USD",
				start.Format("Jan 2 15:04"), start.Add(length).Format(endLayout(length)), b.Requests, b.Errors, b.Tokens, orZero(b.CostUSD))
		}
		if i%every == 0 && err == nil {
			c.XTicks = append(c.XTicks, chartTick{At: x0 + (x1-x0)/2, Label: start.Format(tickLayout(length, n))})
		}
		c.Bars = append(c.Bars, bar)
	}
	return c
}

// niceStep is the y axis' tick step: 1, 2, 2.5 or 5 times a power of ten, so
// that ticks steps reach at least peak.
func niceStep(peak int64, ticks int) int64 {
	if peak <= int64(ticks) {
		return 1
	}
	raw := float64(peak) / float64(ticks)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if s := int64(m * p); float64(s) >= raw {
			return s
		}
	}
	return int64(10 * p)
}

// tickLayout formats an x tick: the time of day for minutes and for the
// hours of one day, the date (and hour) beyond.
func tickLayout(length time.Duration, n int) string {
	switch {
	case length < time.Hour, length == time.Hour && n <= 25:
		return "15:04"
	case length == time.Hour:
		return "Jan 2 15h"
	}
	return "Jan 2"
}

// endLayout formats a bucket's end in its description: the time, or the
// date for buckets of days.
func endLayout(length time.Duration) string {
	if length >= 24*time.Hour {
		return "Jan 2 15:04"
	}
	return "15:04"
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
