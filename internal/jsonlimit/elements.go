package jsonlimit

// Elements calls yield with the raw value of each element of b, a JSON
// array that passed Check (on its own or inside a checked document), in
// order, until yield returns false. Like Member it skips strings with
// bytes.IndexByte and builds nothing, so walking the first messages of a
// long conversation costs only the bytes walked. Given anything else (an
// object, a malformed array) it yields what it can and never reads past b.
func Elements(b []byte, yield func(value []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		end := skipValue(b, i)
		if end <= i {
			return
		}
		if !yield(b[i:end]) {
			return
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i = skipSpace(b, i+1)
	}
}
