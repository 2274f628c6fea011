// Package vec gives code outside the CPU backend the backend's vector
// routines that it runs on the host itself: the exponential sums of token
// sampling. They use the backend's assembly where the CPU has it and the
// same routines in Go elsewhere.
package vec

import "github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"

// SumExp returns the sum of e**((x[i]−m)·scale) over x, added in float64,
// and stores each term in dst[i] when dst is not nil (len(dst) ≥ len(x)).
// Every (x[i]−m)·scale must be ≤ 0 or −Inf. Each term has a relative error
// of about 2e-7; terms below e**−87 are 0.
func SumExp(dst, x []float32, m, scale float32) float64 {
	return kernels.SumExp(dst, x, m, scale)
}

// ExpNeg returns e**x for x ≤ 0 as one term of SumExp: relative error
// about 2e-7, 0 below −87 and for −Inf.
func ExpNeg(x float32) float32 { return kernels.ExpNeg(x) }

// Clean copies src into dst (len(dst) ≥ len(src)) with NaN replaced by
// −Inf and +Inf by the largest float32, and returns the index of the first
// largest element of the result and its value; (0, −Inf) when src is empty
// or all −Inf or NaN.
func Clean(dst, src []float32) (int, float32) { return kernels.Clean(dst, src) }

// ArgMax returns the index of the first largest element of x, which must
// hold no NaN, and 0 when x is empty.
func ArgMax(x []float32) int { return kernels.ArgMax(x) }
