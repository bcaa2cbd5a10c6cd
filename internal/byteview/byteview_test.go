package byteview

import "testing"

func TestString(t *testing.T) {
	for _, in := range []string{"", "a", `{"x":1}`} {
		b := []byte(in)
		if got := String(b); got != in {
			t.Errorf("String(%q) = %q", in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = String([]byte("abc")) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
