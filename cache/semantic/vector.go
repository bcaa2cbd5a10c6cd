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
// vectors it is their cosine similarity. Four accumulators let the CPU
// overlap the multiply-adds.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
