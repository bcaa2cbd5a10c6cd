package messages

import (
	"strconv"
)

// CountBody is the count_tokens answer for n input tokens.
func CountBody(n int64) []byte {
	return append(strconv.AppendInt([]byte(`{"input_tokens":`), n, 10), '}')
}
