package ledger

import (
	"time"
)

// Trace ids are indexed two ways, so that writing a record never costs a
// random page of an index (ledger migration 5):
//
//   - A trace id the gateway made up is a UUIDv7 whose leading 48 bits
//     are the time of the request, so in the text index of trace ids,
//     llm_ledger_trace_made, each new one appends to the last page.
//   - A trace id a client sent (an OpenTelemetry trace id, a random UUID,
//     any string) would land on a random page of that index, and each
//     commit would write one page back per record: 23–25 µs of the
//     writer's CPU a record at a million records, against 7.5 µs for a
//     made-up id. Such a record carries instead a bucket (the id's hash
//     modulo traceBuckets) and the hash itself, indexed as (bucket, ts,
//     hash) by llm_ledger_trace_sent: within a bucket records arrive in
//     time order, so a batch appends to at most traceBuckets pages. A
//     lookup reads one bucket's index entries between the query's times,
//     compares hashes in the index and reads only the records that match.
//
// Which way a record goes depends only on its trace id and time
// (timeOrdered), and a lookup asks both indexes, so a client that sends
// UUIDv7 ids of its own is found either way.

// traceBuckets is how many buckets client trace ids are spread over: the
// most index pages one batch appends to, and 1/traceBuckets of those
// records is what a lookup reads the index entries of. 256 buckets cost
// the writer 12 µs a record at a million records, 64 cost 9.4 µs
// (BenchmarkInsertGatewayShaped/trace=client; a made-up id, 7.5 µs).
const traceBuckets = 64

// timeOrderedSkew is how far from the request's start a UUIDv7's time may
// be and the id still count as time-ordered: clocks of a cluster's
// instances and of a client making its own UUIDv7 ids disagree by less.
const timeOrderedSkew = time.Hour

// traceKey returns what a record with trace id id, started at start,
// stores beside it: nil, nil for a time-ordered id (text-indexed), else
// its bucket and hash.
func traceKey(id string, start time.Time) (bucket, hash any) {
	if timeOrdered(id, start) {
		return nil, nil
	}
	h := traceHash(id)
	return int64(uint64(h) % traceBuckets), h
}

// traceHash is the 64-bit FNV-1a hash of a trace id, as stored (a signed
// column in both databases). It must never change: stored records are
// found by it.
func traceHash(id string) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return int64(h)
}

// timeOrdered reports whether id is a UUIDv7 in the canonical form whose
// time is within timeOrderedSkew of start.
func timeOrdered(id string, start time.Time) bool {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[14] != '7' || id[18] != '-' || id[23] != '-' {
		return false
	}
	var ms int64
	for i := 0; i < 13; i++ {
		if i == 8 {
			continue
		}
		c := id[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return false
		}
		ms = ms<<4 | int64(v)
	}
	d := time.UnixMilli(ms).Sub(start)
	return d > -timeOrderedSkew && d < timeOrderedSkew
}
