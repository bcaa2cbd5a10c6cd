//go:build !race

package logfilter

const raceEnabled = false
