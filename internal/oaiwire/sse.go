package oaiwire

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
)

// MaxEventBytes bounds one server-sent event (and one unterminated line),
// so a provider that never ends an event cannot grow the gateway's memory
// without limit.
const MaxEventBytes = sse.DefaultMaxEvent

// ErrEventTooLarge is returned by Decoder.Feed when an event exceeds
// MaxEventBytes.
var ErrEventTooLarge = sse.ErrEventTooLarge

// Handler receives one event: its name (empty when the event had no
// "event:" line) and its data lines joined with "\n". Both slices are
// reused after the call returns. Returning false stops the decoder: the
// rest of the stream is ignored.
type Handler func(event, data []byte) bool

// Decoder splits a server-sent event stream that arrives in arbitrary
// pieces into events, with the gateway's one splitter (internal/sse):
// lines end with LF, CRLF or CR; a blank line ends an event; comment lines
// (":") are skipped. A line that starts with "{" is taken as a whole
// event, so providers that send newline-delimited JSON instead of SSE
// decode as well. At most one incomplete line is buffered.
type Decoder struct {
	s      sse.Splitter
	inited bool
}

func (d *Decoder) init() {
	if !d.inited {
		d.s.NoRaw, d.s.JSONLines, d.s.MaxEvent = true, true, MaxEventBytes
		d.inited = true
	}
}

// Stopped reports whether a handler stopped the decoder.
func (d *Decoder) Stopped() bool { return d.s.Stopped() }

// Feed decodes p, calling fn for each complete event.
func (d *Decoder) Feed(p []byte, fn Handler) error {
	d.init()
	return d.s.Feed(p, func(ev *sse.Event) bool {
		if !ev.HasData {
			return true
		}
		return fn(ev.Name, ev.Data)
	})
}

// End decodes whatever is buffered as if the stream had ended with a
// blank line, for providers whose last event lacks one.
func (d *Decoder) End(fn Handler) {
	d.init()
	d.s.End(func(ev *sse.Event) bool {
		if !ev.HasData {
			return true
		}
		return fn(ev.Name, ev.Data)
	})
}
