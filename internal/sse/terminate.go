package sse

import "bytes"

// Terminate returns an event's raw bytes ending with the blank line that
// ends an event: a last event of a stream that lacked it (Event.Raw of
// the event End completes) gets it, in the line ending the event uses, so
// an event written after it (an error event) is one of its own and the
// client dispatches both. raw itself is not modified.
func Terminate(raw []byte) []byte {
	switch {
	case len(raw) == 0, bytes.HasSuffix(raw, []byte("\n\n")), bytes.HasSuffix(raw, []byte("\r\r")), bytes.HasSuffix(raw, []byte("\r\n\r\n")):
		return raw
	}
	end := "\n\n"
	switch {
	case bytes.HasSuffix(raw, []byte("\r\n")):
		end = "\r\n"
	case raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r':
		end = string(raw[len(raw)-1:])
	}
	out := make([]byte, 0, len(raw)+len(end))
	return append(append(out, raw...), end...)
}
