package kernels

import "math"

// Row kernels: the pieces of attention (scores of one query against rows of
// K, the softmax exponentials, the weighted sum of rows of V) and the
// single-row matrix product, which is the scores kernel with a unit scale.
// Rows lie at a stride in a larger slice (the KV cache interleaves the kv
// heads). The assembly takes rows whose length is a multiple of 8; other
// lengths run the Go twins, except in DotRows, whose assembly loads the
// last k mod 8 elements under a mask.

// DotRows sets out[r] = scale · Σ_i x[i]·w[r·stride+i] for r < len(out).
func DotRows(x, w []float32, stride int, scale float32, out []float32) {
	k, n := len(x), len(out)
	if n == 0 || k == 0 {
		clear(out)
		return
	}
	_ = w[(n-1)*stride+k-1]
	if useAsm && k > 0 {
		dotRowsF32AVX2(&x[0], &w[0], 4*stride, k, n, &out[0], scale)
		return
	}
	dotRowsGo(x, w, stride, scale, out)
}

// dotRowsF16 sets out[r] = Σ_i x[i]·w[r·stride+i] for r < len(out), f16
// weights: the assembly over the first len(x) &^ 7 elements, then the
// rest in Go, as dotF16x4x3 does.
func dotRowsF16(x []float32, w []uint16, stride int, out []float32) {
	dotRows16(x, w, stride, out, dotRowsF16AVX2, dotF16Go)
}

// dotRowsBF16 is dotRowsF16 for bf16 weights.
func dotRowsBF16(x []float32, w []uint16, stride int, out []float32) {
	dotRows16(x, w, stride, out, dotRowsBF16AVX2, dotBF16Go)
}

// dotRows16 is the body of dotRowsF16 and dotRowsBF16: asm covers the
// first len(x) &^ 7 elements of every row, tail (the Go twin) the rest.
func dotRows16(x []float32, w []uint16, stride int, out []float32,
	asm func(x *float32, w *uint16, strideBytes, m, n int, out *float32), tail func([]float32, []uint16) float32) {
	k, n := len(x), len(out)
	if n == 0 || k == 0 {
		clear(out)
		return
	}
	_ = w[(n-1)*stride+k-1]
	m := 0
	if useAsm && k >= 8 {
		m = k &^ 7
		asm(&x[0], &w[0], 2*stride, m, n, &out[0])
	} else {
		clear(out)
	}
	if m < k {
		for r := range out {
			out[r] += tail(x[m:], w[r*stride+m:r*stride+k])
		}
	}
}

// AxpyRows adds Σ_r p[r]·v[r·stride+i] to out[i] for r < len(p).
func AxpyRows(p, v []float32, stride int, out []float32) {
	k, n := len(out), len(p)
	if n == 0 || k == 0 {
		return
	}
	_ = v[(n-1)*stride+k-1]
	if useAsm && k%8 == 0 {
		axpyRowsF32AVX2(&p[0], &v[0], 4*stride, k, n, &out[0])
		return
	}
	axpyRowsGo(p, v, stride, out)
}

// Max returns the largest element of x, or −Inf if x is empty.
func Max(x []float32) float32 {
	n := len(x)
	if useAsm && n >= 8 {
		return maxF32AVX2(&x[0], n)
	}
	return maxF32Go(x, float32(math.Inf(-1)))
}

// ExpShift replaces each x[i] by e**(x[i]−m), which must be ≤ 0, and
// returns their sum (added in float64; SumExp). The relative error of each
// is about 2e-7; results below e**−87 are 0.
func ExpShift(x []float32, m float32) float32 { return float32(SumExp(x, x, m, 1)) }

// Clean copies src into dst (len(dst) ≥ len(src)) with NaN replaced by
// −Inf and +Inf by the largest float32, and returns the index of the first
// largest element of the result and its value; (0, −Inf) when src is empty
// or all −Inf or NaN.
func Clean(dst, src []float32) (int, float32) {
	n := len(src)
	dst = dst[:n]
	m, i := float32(math.Inf(-1)), 0
	if useAsm && n >= 8 {
		i = n &^ 7
		m = cleanAVX2(&dst[0], &src[0], i)
	}
	for ; i < n; i++ {
		v := src[i]
		switch {
		case v != v:
			v = float32(math.Inf(-1))
		case v > math.MaxFloat32:
			v = math.MaxFloat32
		}
		dst[i] = v
		m = max(m, v)
	}
	return firstOf(dst, m), m
}

// ArgMax returns the index of the first largest element of x, which holds
// no NaN, and 0 when x is empty.
func ArgMax(x []float32) int {
	if len(x) == 0 {
		return 0
	}
	return firstOf(x, Max(x))
}

// firstOf returns the index of the first element of x equal to m, or 0.
func firstOf(x []float32, m float32) int {
	i := 0
	if n := len(x) &^ 7; useAsm && n > 0 {
		if i = firstEqAVX2(&x[0], n, m); i < n {
			return i
		}
	}
	for ; i < len(x); i++ {
		if x[i] == m {
			return i
		}
	}
	return 0
}

// SumExp returns the sum of e**((x[i]−m)·scale) over x, added in float64,
// and stores each term in dst[i] when dst is not nil (len(dst) ≥ len(x);
// dst may be x). Every (x[i]−m)·scale must be ≤ 0 or −Inf. Each term has a
// relative error of about 2e-7 (ExpNeg); terms below e**−87 are 0.
func SumExp(dst, x []float32, m, scale float32) float64 {
	n := len(x)
	if n == 0 {
		return 0
	}
	if dst != nil {
		dst = dst[:n]
	}
	if useAsm {
		var d *float32
		if dst != nil {
			d = &dst[0]
		}
		return sumExpAVX2(d, &x[0], n, m, scale)
	}
	return sumExpGo(dst, x, m, scale)
}

// ExpNeg returns e**x for x ≤ 0 with a relative error of about 2e-7, and 0
// for x below −87 or −Inf: one term of SumExp, in Go.
func ExpNeg(x float32) float32 { return expNeg(x) }

// Scale multiplies x by s.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// SiLUMul sets dst[i] = silu(g[i])·u[i] = g[i]/(1+e**−g[i])·u[i] for
// i < len(dst). dst may be g or u.
func SiLUMul(dst, g, u []float32) {
	n := len(dst)
	g, u = g[:n], u[:n]
	if useAsm && n > 0 {
		siluMulAVX2(&dst[0], &g[0], &u[0], n)
		return
	}
	siluMulGo(dst, g, u)
}
