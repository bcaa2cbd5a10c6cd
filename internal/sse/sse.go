// Package sse is the gateway's one server-sent event splitter. It cuts a
// stream that arrives in arbitrary pieces into events, accepting the three
// line endings the SSE specification allows (LF, CRLF and a lone CR), and
// gives each event both its exact bytes (for byte-for-byte pass-through)
// and its parsed name and data (for inspection). The handlers'
// pass-through filter, the cache's stream assembly and the provider
// stream decoders all use it, so they agree on where an event ends.
package sse

import (
	"bytes"
	"errors"
)

// DefaultMaxEvent bounds one event (and, with NoRaw, one line) when
// Splitter.MaxEvent is zero, so a provider that never ends an event
// cannot grow the gateway's memory without limit.
const DefaultMaxEvent = 16 << 20

// ErrEventTooLarge is returned by Feed when an event exceeds the limit.
var ErrEventTooLarge = errors.New("stream event exceeds the size limit")

// Event is one event of a stream. Its slices are reused after the
// callback returns.
type Event struct {
	// Raw is the event's exact bytes: everything after the previous
	// event, through this event's terminating blank line (or to the end
	// of the stream for a last event without one). Empty with NoRaw.
	Raw []byte
	// Name is the value of the event's "event:" line, if any.
	Name []byte
	// Data is the event's data lines joined with "\n".
	Data []byte
	// HasData reports whether the event had a data line (an event of
	// only comments or an empty data is told apart by it).
	HasData bool
}

// Func receives one event; returning false stops the splitter, which
// then ignores the rest of the stream.
type Func func(ev *Event) bool

// Splitter splits a stream into events. The zero value is ready to use.
type Splitter struct {
	// MaxEvent bounds the bytes buffered for one event; 0 means
	// DefaultMaxEvent.
	MaxEvent int
	// NoRaw drops each line once parsed, so only an incomplete line is
	// buffered; Event.Raw is then empty. Decoders that only need the
	// data set it.
	NoRaw bool
	// JSONLines takes a line that starts with "{" as a whole event, so
	// providers that send newline-delimited JSON instead of SSE decode
	// too.
	JSONLines bool

	buf     []byte // unconsumed bytes: the current event's raw so far
	scan    int    // offset in buf where line scanning resumes
	skipLF  bool   // the last byte seen was a CR ending a line
	ev      Event
	stopped bool
}

// Stopped reports whether a callback stopped the splitter.
func (s *Splitter) Stopped() bool { return s.stopped }

// Buffered returns how many bytes are held for an incomplete event.
func (s *Splitter) Buffered() int { return len(s.buf) }

func (s *Splitter) limit() int {
	if s.MaxEvent > 0 {
		return s.MaxEvent
	}
	return DefaultMaxEvent
}

// Feed splits p, calling fn for each event it completes.
func (s *Splitter) Feed(p []byte, fn Func) error {
	if s.stopped {
		return nil
	}
	b, pos := p, 0
	if len(s.buf) > 0 {
		s.buf = append(s.buf, p...)
		b, pos = s.buf, s.scan
	}
	evStart := 0
	for pos < len(b) {
		if s.skipLF {
			s.skipLF = false
			if b[pos] == '\n' {
				pos++
				continue
			}
		}
		i := indexEOL(b[pos:])
		if i < 0 {
			break
		}
		lineStart, lineEnd := pos, pos+i
		pos = lineEnd + 1
		if b[lineEnd] == '\r' {
			if pos < len(b) {
				if b[pos] == '\n' {
					pos++
				}
			} else {
				s.skipLF = true
			}
		}
		var ok bool
		evStart, ok = s.line(b, evStart, lineStart, lineEnd, pos, fn)
		if !ok {
			s.stopped = true
			s.buf, s.scan = s.buf[:0], 0
			return nil
		}
		if s.NoRaw {
			evStart = pos
		}
	}
	rest := b[evStart:]
	if len(rest) > s.limit() || len(s.ev.Data) > s.limit() {
		s.buf, s.scan, s.ev.Data = nil, 0, nil
		return ErrEventTooLarge
	}
	s.scan = pos - evStart
	if len(s.buf) > 0 {
		n := copy(s.buf, rest) // overlapping copy is a memmove
		s.buf = s.buf[:n]
	} else {
		s.buf = append(s.buf[:0], rest...)
	}
	return nil
}

// End completes the stream: a last event that lacked its blank line (or
// bytes after the last event) is delivered as if it had one.
func (s *Splitter) End(fn Func) {
	if s.stopped {
		return
	}
	b, scan := s.buf, s.scan
	s.buf, s.scan, s.skipLF = nil, 0, false
	if scan < len(b) {
		// The unterminated last line.
		if _, ok := s.line(b, 0, scan, len(b), len(b), fn); !ok {
			s.stopped = true
			return
		}
		if s.JSONLines && b[scan] == '{' {
			return // delivered as its own event
		}
	}
	if !s.NoRaw {
		s.ev.Raw = b
	}
	if !s.dispatch(fn) {
		s.stopped = true
	}
}

// line handles one line b[lineStart:lineEnd]; next is the offset after its
// ending. It returns the new event start.
func (s *Splitter) line(b []byte, evStart, lineStart, lineEnd, next int, fn Func) (int, bool) {
	line := b[lineStart:lineEnd]
	if len(line) == 0 {
		if !s.NoRaw {
			s.ev.Raw = b[evStart:next]
		}
		return next, s.dispatch(fn)
	}
	switch line[0] {
	case ':':
		return evStart, true
	case '{':
		if !s.JSONLines {
			break
		}
		if s.ev.HasData {
			if !s.NoRaw {
				s.ev.Raw = b[evStart:lineStart]
			}
			if !s.dispatch(fn) {
				return next, false
			}
		}
		s.ev.Data = append(s.ev.Data[:0], line...)
		s.ev.HasData = true
		if !s.NoRaw {
			s.ev.Raw = b[lineStart:next]
		}
		return next, s.dispatch(fn)
	}
	field, value := line, line[:0]
	for i, c := range line {
		if c == ':' {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
			break
		}
	}
	switch string(field) {
	case "data":
		if s.ev.HasData {
			s.ev.Data = append(s.ev.Data, '\n')
		}
		s.ev.Data = append(s.ev.Data, value...)
		s.ev.HasData = true
	case "event":
		s.ev.Name = append(s.ev.Name[:0], value...)
	}
	return evStart, true
}

// dispatch hands the current event to fn and resets it. Events of
// neither data nor raw bytes (NoRaw, comments only) are not delivered.
func (s *Splitter) dispatch(fn Func) bool {
	ok := true
	if s.ev.HasData || len(s.ev.Raw) > 0 {
		ok = fn(&s.ev)
	}
	s.ev.Raw, s.ev.Name, s.ev.Data, s.ev.HasData = nil, s.ev.Name[:0], s.ev.Data[:0], false
	return ok
}

// indexEOL returns the index of the first CR or LF in b, or -1, with two
// vectorised byte searches rather than a byte loop.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	head := b
	if i >= 0 {
		head = b[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}
