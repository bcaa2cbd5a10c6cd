package oaiwire

import (
	"bytes"
	"errors"
)

// MaxEventBytes bounds one server-sent event (and one unterminated line),
// so a provider that never ends an event cannot grow the gateway's memory
// without limit.
const MaxEventBytes = 16 << 20

// ErrEventTooLarge is returned by Decoder.Feed when an event exceeds
// MaxEventBytes.
var ErrEventTooLarge = errors.New("stream event exceeds the size limit")

// Handler receives one event: its name (empty when the event had no
// "event:" line) and its data lines joined with "\n". Both slices are
// reused after the call returns. Returning false stops the decoder: the
// rest of the stream is ignored.
type Handler func(event, data []byte) bool

// Decoder splits a server-sent event stream that arrives in arbitrary
// pieces into events. Lines end with "\n" or "\r\n"; a blank line ends an
// event; comment lines (":") are skipped. A line that starts with "{" is
// taken as a whole event, so providers that send newline-delimited JSON
// instead of SSE decode as well. At most one incomplete line is buffered.
type Decoder struct {
	pending []byte
	event   []byte
	data    []byte
	hasData bool
	stopped bool
}

// Stopped reports whether a handler stopped the decoder.
func (d *Decoder) Stopped() bool { return d.stopped }

// Feed decodes p, calling fn for each complete event.
func (d *Decoder) Feed(p []byte, fn Handler) error {
	if d.stopped {
		return nil
	}
	buf, from := p, 0
	if len(d.pending) > 0 {
		// The pending bytes hold no newline: scan only what is new, so a
		// long line arriving in small pieces costs linear time.
		from = len(d.pending)
		d.pending = append(d.pending, p...)
		buf = d.pending
	}
	start := 0
	for {
		i := bytes.IndexByte(buf[from:], '\n')
		if i < 0 {
			break
		}
		line := buf[start : from+i]
		start = from + i + 1
		from = start
		if !d.line(line, fn) {
			d.stopped = true
			d.pending = d.pending[:0]
			return nil
		}
	}
	rest := buf[start:]
	if len(rest) > MaxEventBytes || len(d.data) > MaxEventBytes {
		d.pending, d.data = nil, nil
		return ErrEventTooLarge
	}
	if len(d.pending) > 0 {
		n := copy(d.pending, rest) // overlapping copy is a memmove
		d.pending = d.pending[:n]
	} else {
		d.pending = append(d.pending[:0], rest...)
	}
	return nil
}

// End decodes whatever is buffered as if the stream had ended with a
// blank line, for providers whose last event lacks one.
func (d *Decoder) End(fn Handler) {
	if d.stopped {
		return
	}
	if len(d.pending) > 0 {
		line := d.pending
		d.pending = nil
		if !d.line(line, fn) {
			d.stopped = true
			return
		}
	}
	if !d.dispatch(fn) {
		d.stopped = true
	}
}

func (d *Decoder) line(line []byte, fn Handler) bool {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) == 0 {
		return d.dispatch(fn)
	}
	switch line[0] {
	case ':':
		return true
	case '{':
		if !d.dispatch(fn) {
			return false
		}
		d.data = append(d.data[:0], line...)
		d.hasData = true
		return d.dispatch(fn)
	}
	field, value := line, line[:0]
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.event = append(d.event[:0], value...)
	}
	return true
}

func (d *Decoder) dispatch(fn Handler) bool {
	if !d.hasData {
		d.event = d.event[:0]
		return true
	}
	ok := fn(d.event, d.data)
	d.event, d.data, d.hasData = d.event[:0], d.data[:0], false
	return ok
}
