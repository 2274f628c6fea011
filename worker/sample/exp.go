package sample

import "math"

// expUnderflow is the argument below which expNeg returns 0: exp(-104) is
// below the smallest float32 subnormal, so such terms cannot change a
// float32 result.
const expUnderflow = -104

// expNeg returns e**y for y <= 0 (including -Inf) with a relative error
// below 1e-8, enough for float32 probabilities. It is several times faster
// than math.Exp, which matters because sampling evaluates one exponential
// per vocabulary entry per step.
//
// Method: e**y = 2**n · 2**f with n = round(y·log2 e) and |f| <= 1/2; 2**f is
// e**g for g = f·ln 2, |g| < 0.35, by its Taylor series to degree 7
// (truncation error below 6e-9), and 2**n is added to the exponent bits.
func expNeg(y float64) float64 {
	if !(y >= expUnderflow) { // also catches NaN and -Inf
		return 0
	}
	t := y * math.Log2E
	n := math.Floor(t + 0.5)
	g := (t - n) * math.Ln2
	p := 1 + g*(1+g*(1.0/2+g*(1.0/6+g*(1.0/24+g*(1.0/120+g*(1.0/720+g*(1.0/5040)))))))
	return math.Float64frombits(math.Float64bits(p) + uint64(int64(n))<<52)
}
