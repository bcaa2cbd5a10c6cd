package ledger

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"

	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// The two JSON texts of a record's row, written by hand: encoding/json's
// reflection over a map was a tenth of the writer's time per record. Both
// are read back with encoding/json (a page of logs at a time).
//
//   - metadata: the pairs as one object, keys in order, as the metadata
//     filter reads them (json_extract, PostgreSQL's ->>);
//   - detail (migration 8): what no query filters or sums by, with the
//     members that are zero or empty left out:
//     {"op":"chat.completions","stream":1,"cached":…,"cache_write":…,
//     "reasoning":…,"ttft_us":…,"retries":…,"estimated":1}.

// rowDetail is detail as read back. The records migration 8 copied carry
// every member, zeros and a null ttft_us included.
type rowDetail struct {
	Op         string `json:"op"`
	Stream     int64  `json:"stream"`
	Cached     int64  `json:"cached"`
	CacheWrite int64  `json:"cache_write"`
	Reasoning  int64  `json:"reasoning"`
	TTFTUS     int64  `json:"ttft_us"`
	Retries    int64  `json:"retries"`
	Estimated  int64  `json:"estimated"`
}

// appendDetail appends r's detail object to b.
func appendDetail(b []byte, r *Record) []byte {
	b = append(b, `{"op":`...)
	b = oaiwire.AppendString(b, r.Operation)
	num := func(name string, v int64) {
		if v != 0 {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, v, 10)
		}
	}
	flag := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	num("stream", flag(r.Stream))
	num("cached", r.CachedTokens)
	num("cache_write", r.CacheWriteTokens)
	num("reasoning", r.ReasoningTokens)
	if r.TTFT > 0 {
		num("ttft_us", r.TTFT.Microseconds())
	}
	num("retries", int64(r.Retries))
	num("estimated", flag(r.Estimated))
	return append(b, '}')
}

// readDetail fills r's fields that detail holds.
func readDetail(r *Record, detail string) {
	var d rowDetail
	_ = json.Unmarshal([]byte(detail), &d)
	r.Operation, r.Stream = d.Op, d.Stream != 0
	r.CachedTokens, r.CacheWriteTokens, r.ReasoningTokens = d.Cached, d.CacheWrite, d.Reasoning
	r.TTFT = time.Duration(d.TTFTUS) * time.Microsecond
	r.Retries, r.Estimated = int(d.Retries), d.Estimated != 0
}

// appendMetadata appends m as a JSON object, keys in order.
func appendMetadata(b []byte, m map[string]string) []byte {
	var small [MaxMetadataPairs]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = oaiwire.AppendString(b, k)
		b = append(b, ':')
		b = oaiwire.AppendString(b, m[k])
	}
	return append(b, '}')
}
