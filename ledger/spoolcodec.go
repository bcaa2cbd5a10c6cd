package ledger

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"time"
)

// A spooled record is one frame: its payload's length (4 bytes, little
// endian), the payload's CRC-32C (4 bytes), then the payload: a version
// byte, the record's fields as varints and length-prefixed strings, and
// its metadata pairs in key order, then (version 2) the error type. A
// frame cut short or whose checksum
// does not match (the process died while writing it) ends its segment.

// frameHeader is the bytes a frame adds to its payload.
const frameHeader = 8

// spoolVersion is the payload's format written: 2 added the error type
// after the metadata. Frames of version 1, which an older gateway left
// in the spool, are read too (no error type).
const spoolVersion = 2

// maxFrame bounds a payload read back: a record holds at most 16 fields
// of MaxField bytes and 32 metadata pairs (MaxMetadataKey and
// MaxMetadataValue), so anything longer is a damaged length.
const maxFrame = 1 << 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errBadFrame = errors.New("ledger: damaged spool frame")

// appendFrame appends r's frame to b.
func appendFrame(b []byte, r *Record) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, spoolVersion)
	b = binary.AppendVarint(b, r.Time.UnixNano())
	for _, s := range r.strings() {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, v := range r.ints() {
		b = binary.AppendVarint(b, v)
	}
	var flags byte
	if r.Stream {
		flags |= 1
	}
	if r.CostKnown {
		flags |= 2
	}
	if r.Estimated {
		flags |= 4
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(r.Metadata)))
	if len(r.Metadata) > 0 {
		keys := make([]string, 0, len(r.Metadata))
		for k := range r.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := r.Metadata[k]
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.ErrorType)))
	b = append(b, r.ErrorType...)
	payload := b[start+frameHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, castagnoli))
	return b
}

// strings are r's text fields in the frame's order.
func (r *Record) strings() [12]string {
	return [12]string{r.TraceID, r.APIKey, r.Workspace, r.Organisation, r.VirtualKey, r.ConfigID,
		r.Provider, r.Model, r.Operation, r.CacheState, r.BatchID, r.CustomID}
}

// ints are r's numbers in the frame's order.
func (r *Record) ints() [10]int64 {
	return [10]int64{int64(r.Status), r.InputTokens, r.OutputTokens, r.CachedTokens, r.CacheWriteTokens,
		r.ReasoningTokens, r.CostNanoUSD, int64(r.Latency), int64(r.TTFT), int64(r.Retries)}
}

// readFrame decodes the frame at the start of b into r and returns its
// length; errBadFrame when b holds no whole, intact frame.
func readFrame(b []byte, r *Record) (int, error) {
	if len(b) < frameHeader {
		return 0, errBadFrame
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < 1 || n > maxFrame || len(b) < frameHeader+n {
		return 0, errBadFrame
	}
	p := b[frameHeader : frameHeader+n]
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[4:]) || p[0] < 1 || p[0] > spoolVersion {
		return 0, errBadFrame
	}
	d := decoder{b: p[1:]}
	*r = Record{Time: time.Unix(0, d.varint()).UTC()}
	for _, f := range []*string{&r.TraceID, &r.APIKey, &r.Workspace, &r.Organisation, &r.VirtualKey, &r.ConfigID,
		&r.Provider, &r.Model, &r.Operation, &r.CacheState, &r.BatchID, &r.CustomID} {
		*f = d.str()
	}
	var status, retries, latency, ttft int64
	for _, f := range []*int64{&status, &r.InputTokens, &r.OutputTokens, &r.CachedTokens, &r.CacheWriteTokens,
		&r.ReasoningTokens, &r.CostNanoUSD, &latency, &ttft, &retries} {
		*f = d.varint()
	}
	r.Status, r.Retries, r.Latency, r.TTFT = int(status), int(retries), time.Duration(latency), time.Duration(ttft)
	flags := d.byte()
	r.Stream, r.CostKnown, r.Estimated = flags&1 != 0, flags&2 != 0, flags&4 != 0
	if m := d.uvarint(); m > uint64(len(d.b))/2 {
		d.bad = true
	} else if m > 0 {
		r.Metadata = make(map[string]string, m)
		for i := uint64(0); i < m; i++ {
			k := d.str()
			r.Metadata[k] = d.str()
		}
	}
	if p[0] >= 2 {
		r.ErrorType = d.str()
	}
	if d.bad {
		return 0, errBadFrame
	}
	return frameHeader + n, nil
}

// decoder reads a payload, remembering whether it ran out.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}
