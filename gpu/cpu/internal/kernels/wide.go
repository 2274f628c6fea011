package kernels

import (
	"sync/atomic"

	"github.com/zerolayer/zerolayer/gpu"
)

// The wide tile kernels (AVX-512, wide_amd64.s) multiply four or eight
// activation rows by several weight rows at once and give each product the
// bits of the AVX2 kernels, so tile mixes them freely with the x4 and
// single-row kernels.

// wideOff turns the wide kernels off (tests and benchmarks compare the two
// paths in one process; products in flight may run on either).
var wideOff atomic.Bool

// SetWide turns the AVX-512 tile kernels on or off (they are on wherever the
// CPU has them) and returns the setting it replaced.
func SetWide(on bool) (was bool) {
	return !wideOff.Swap(!on)
}

// wideOn reports whether the wide kernels run: the CPU has them and they
// are not turned off.
func wideOn() bool { return useAsm && hasWide && !wideOff.Load() }

// Paths names the kernel paths this CPU runs: "go", "avx2", or
// "avx2+avx512" / "avx2+avx512-vnni" when the wide kernels are on.
func Paths() string {
	switch {
	case !useAsm:
		return "go"
	case !wideOn():
		return "avx2"
	case hasVNNI:
		return "avx2+avx512-vnni"
	}
	return "avx2+avx512"
}

// wideRows is the number of weight rows a wide kernel takes at once for a
// matrix of type t with cols columns, or 0 when none applies.
func wideRows(t gpu.DType, cols int) int {
	if !wideOn() {
		return 0
	}
	switch t {
	case gpu.F32, gpu.F16, gpu.BF16:
		if cols%8 == 0 {
			return 8
		}
	case gpu.Q8_0:
		if hasVNNI {
			return 4
		}
	case gpu.Q4_0:
		if hasVNNI && cols%(2*qk8) == 0 {
			return 4
		}
	case gpu.Q4_K, gpu.Q6_K:
		return 2
	}
	return 0
}

// wide computes dst rows m0..m1 (m1−m0 a multiple of 4), columns r0..r1
// (r1−r0 a multiple of mm.wr) with the wide kernels: Q8_0 and Q4_0 eight
// activation rows at a time where there are eight, the rest four at a
// time.
func (mm *MatMul) wide(r0, r1, m0, m1 int) {
	var o [32]float32
	K, N, rb, wr := mm.cols, mm.rows, mm.rb, mm.wr
	dst := mm.dst
	for r := r0; r < r1; r += wr {
		w := mm.w[r*rb : (r+wr)*rb]
		for m := m0; m < m1; {
			rows := 4
			if m+8 <= m1 && (mm.t == gpu.Q8_0 || mm.t == gpu.Q4_0) {
				rows = 8
			}
			stride := 4 // o holds x row i · w row j at stride·j + i
			switch mm.t {
			case gpu.F32:
				x := mm.x[m*K : (m+4)*K]
				dotF32x4x8AVX512(&x[0], 4*K, &f32s(w)[0], rb, K, &o)
			case gpu.F16:
				x := mm.x[m*K : (m+4)*K]
				dotF16x4x8AVX512(&x[0], 4*K, &u16s(w)[0], rb, K, &o)
			case gpu.BF16:
				x := mm.x[m*K : (m+4)*K]
				dotBF16x4x8AVX512(&x[0], 4*K, &u16s(w)[0], rb, K, &o)
			case gpu.Q8_0:
				nb := K / qk8
				xq, xd := mm.aq[m*K:(m+rows)*K], mm.ad[m*nb:(m+rows)*nb]
				dotQ8_0x8x4VNNI(&w[0], rb, &xq[0], &xd[0], nb, K, 4*nb, rows, &o)
				stride = 8
			case gpu.Q4_0:
				np := q4Pairs(K)
				x := mm.ap[m*np : (m+rows)*np]
				dotQ4_0x8x4VNNI(&w[0], rb, &x[0], np, 128*np, rows, &o)
				stride = 8
			case gpu.Q4_K:
				nb := K / qkK
				x := mm.akb[m*nb : (m+4)*nb]
				dotQ4_Kx4x2AVX512(&w[0], rb, &x[0], nb, 320*nb, (*[8]float32)(o[:8]))
			case gpu.Q6_K:
				nb := K / qkK
				x := mm.akb[m*nb : (m+4)*nb]
				dotQ6_Kx4x2AVX512(&w[0], rb, &x[0], nb, 320*nb, (*[8]float32)(o[:8]))
			}
			for i := 0; i < rows; i++ {
				d := dst[(m+i)*N+r:][:wr]
				for j := range d {
					d[j] = o[stride*j+i]
				}
			}
			m += rows
		}
	}
}
