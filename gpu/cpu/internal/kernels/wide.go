package kernels

import (
	"sync"
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
	if mm.t == gpu.F32 && K > f32Part && mm.m >= 64 && m1-m0 > 4 {
		mm.wideF32Parts(r0, r1, m0, m1)
		return
	}
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

// f32Part is the columns of an F32 weight tile that wideF32Parts runs at a
// time: eight rows of 512 floats (16 KiB) and a group of four activation
// rows' 512 (8 KiB) stay in a 32–48 KiB L1 data cache, where whole rows of
// 2048 columns (64 + 32 KiB) came from L2 for every group.
const f32Part = 512

// f32Acc holds the accumulators of wideF32Parts' groups between parts.
var f32Acc = sync.Pool{New: func() any { return new([][256]float32) }}

// wideF32Parts is wide for F32 matrices of more than f32Part columns: each
// weight tile's columns in parts of f32Part, every activation group through
// a part before the next, the accumulators carried between parts exactly
// (dotF32x4x8PartAVX512), so the bits are wide's.
func (mm *MatMul) wideF32Parts(r0, r1, m0, m1 int) {
	var o [32]float32
	K, N, rb := mm.cols, mm.rows, mm.rb
	groups := (m1 - m0) / 4
	buf := f32Acc.Get().(*[][256]float32)
	defer f32Acc.Put(buf)
	if cap(*buf) < groups {
		*buf = make([][256]float32, groups)
	}
	acc := (*buf)[:groups]
	for r := r0; r < r1; r += 8 {
		w := f32s(mm.w[r*rb : (r+8)*rb])
		for k0 := 0; k0 < K; k0 += f32Part {
			n := min(f32Part, K-k0)
			mode := 0
			if k0 > 0 {
				mode |= 1
			}
			last := k0+n == K
			if last {
				mode |= 2
			}
			for g := range acc {
				m := m0 + 4*g
				dotF32x4x8PartAVX512(&mm.x[m*K+k0], 4*K, &w[k0], rb, n, &acc[g], &o, mode)
				if last {
					for i := 0; i < 4; i++ {
						d := dst32(mm.dst, (m+i)*N+r)
						for j := range d {
							d[j] = o[4*j+i]
						}
					}
				}
			}
		}
	}
}

// dst32 is the eight outputs of a wide F32 tile from index i of dst.
func dst32(dst []float32, i int) []float32 { return dst[i : i+8] }
