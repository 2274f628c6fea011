//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2 kernels; they also need FMA and F16C.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// Assembly kernels (kernels_amd64.s). Lengths n are elements, multiples of
// 8 and > 0; nb counts blocks, > 0. Strides are in bytes.

//go:noescape
func sumF32AVX2(x *float32, n int) float32

//go:noescape
func dotF32AVX2(x, w *float32, n int) float32

//go:noescape
func dotF16AVX2(x *float32, w *uint16, n int) float32

//go:noescape
func dotBF16AVX2(x *float32, w *uint16, n int) float32

//go:noescape
func dotF32x4AVX2(x *float32, xstride int, w *float32, n int, out *[4]float32)

//go:noescape
func dotF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32)

//go:noescape
func dotBF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32)

// The Rows kernels take n ≥ 1 weight rows rb bytes apart and store one
// result per row.
//
//go:noescape
func dotQ8_0RowsAVX2(w *byte, rb, n int, xq *int8, xd *float32, nb int, out *float32)

//go:noescape
func dotQ8_0x4AVX2(w *byte, xq *int8, xd *float32, nb, qstride, dstride int, out *[4]float32)

// The Q4_0 kernels take np pairs of blocks and the f16 → f32 table (the
// scale lookup is cheaper than VCVTPH2PS here).
//
//go:noescape
func dotQ4_0RowsAVX2(w *byte, rb, n int, x *pairQ4, np int, tab *float32, out *float32)

//go:noescape
func dotQ4_0x4AVX2(w *byte, x *pairQ4, np, xstride int, tab *float32, out *[4]float32)

//go:noescape
func dotQ4_KAVX2(w *byte, x *blockQ8K, nb int) float32

//go:noescape
func dotQ4_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)

//go:noescape
func dotQ6_KAVX2(w *byte, x *blockQ8K, nb int) float32

//go:noescape
func dotQ6_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)

// Row kernels (attn_amd64.s): k is a multiple of 8 and > 0, strides are in
// bytes.

//go:noescape
func dotRowsF32AVX2(x, w *float32, wstride, k, n int, out *float32, scale float32)

//go:noescape
func axpyRowsF32AVX2(p, v *float32, vstride, k, n int, out *float32)

//go:noescape
func maxF32AVX2(x *float32, n int) float32

//go:noescape
func cleanAVX2(dst, src *float32, n int) float32

//go:noescape
func firstEqAVX2(x *float32, n int, m float32) int

//go:noescape
func sumExpAVX2(dst, x *float32, n int, m, scale float32) float64

//go:noescape
func siluMulAVX2(dst, gate, up *float32, n int)

// The 4×3 tile kernels: four activation rows (stride xstride bytes) by
// three weight rows (stride wstride bytes); out[3i+j] is x row i · w row j.

//go:noescape
func dotF32x4x3AVX2(x *float32, xstride int, w *float32, wstride, n int, out *[12]float32)

//go:noescape
func dotF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32)

//go:noescape
func dotBF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32)

// Activation quantizers (quantize_amd64.s), nb ≥ 1 blocks of 32.

//go:noescape
func quantizeQ8_0AVX2(x *float32, nb int, qs *int8, d *float32)

//go:noescape
func quantizeQ4PairsAVX2(x *float32, nb int, p *pairQ4)

//go:noescape
func quantizeQ8KAVX2(x *float32, nb int, blocks *blockQ8K)

// F16 and BF16 weight rows (k a multiple of 8, > 0), unscaled.
//
//go:noescape
func dotRowsF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32)

//go:noescape
func dotRowsBF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32)

// Kernels of the further types (quant_more_amd64.s), nb ≥ 1.
//
//go:noescape
func dotQ4_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ5_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ5_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32

//go:noescape
func dotQ5_KAVX2(w *byte, x *blockQ8K, nb int) float32

//go:noescape
func dotQ3_KAVX2(w *byte, x *blockQ8K, nb int) float32

//go:noescape
func dotQ2_KAVX2(w *byte, x *blockQ8K, nb int) float32

//go:noescape
func dotQ5_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)

//go:noescape
func dotQ3_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)
