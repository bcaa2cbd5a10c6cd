// Package byteview reads a byte slice as a string without copying it,
// for gjson and other string readers on the request path, where a copy
// per chunk or per answer is the largest allocation there is.
package byteview

import "unsafe"

// String is b as a string, sharing b's memory. The caller must not
// change b while the string, or anything taken from it without a copy
// (a gjson.Result's Str or Raw), is in use.
func String(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
