//go:build !amd64 || purego

package kernels

import "unsafe"

// Without the amd64 assembly every kernel runs its Go twin. useAsm stays a
// variable so that tests build everywhere.
var useAsm = false

const noAsm = "kernels: assembly kernel called without assembly support"

func sumF32AVX2(x *float32, n int) float32             { panic(noAsm) }
func dotF32AVX2(x, w *float32, n int) float32          { panic(noAsm) }
func dotF16AVX2(x *float32, w *uint16, n int) float32  { panic(noAsm) }
func dotBF16AVX2(x *float32, w *uint16, n int) float32 { panic(noAsm) }
func dotQ4_KAVX2(w *byte, x *blockQ8K, nb int) float32 { panic(noAsm) }
func dotQ6_KAVX2(w *byte, x *blockQ8K, nb int) float32 { panic(noAsm) }

func dotF32x4AVX2(x *float32, xstride int, w *float32, n int, out *[4]float32) { panic(noAsm) }
func dotF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32)  { panic(noAsm) }
func dotBF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32) { panic(noAsm) }

func dotQ8_0x4AVX2(w *byte, xq *int8, xd *float32, nb, qstride, dstride int, out *[4]float32) {
	panic(noAsm)
}

func dotQ4_0x4AVX2(w *byte, x *pairQ4, np, xstride int, tab *float32, out *[4]float32) {
	panic(noAsm)
}

func dotQ4_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32) { panic(noAsm) }
func dotQ6_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32) { panic(noAsm) }

func dotRowsF32AVX2(x, w *float32, wstride, k, n int, out *float32, scale float32) { panic(noAsm) }
func axpyRowsF32AVX2(p, v *float32, vstride, k, n int, out *float32)               { panic(noAsm) }
func maxF32AVX2(x *float32, n int) float32                                         { panic(noAsm) }
func cleanAVX2(dst, src *float32, n int) float32                                   { panic(noAsm) }
func firstEqAVX2(x *float32, n int, m float32) int                                 { panic(noAsm) }
func sumExpAVX2(dst, x *float32, n int, m, scale float32) float64                  { panic(noAsm) }
func siluMulAVX2(dst, gate, up *float32, n int)                                    { panic(noAsm) }

func dotF32x4x3AVX2(x *float32, xstride int, w *float32, wstride, n int, out *[12]float32) {
	panic(noAsm)
}

func dotF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32) {
	panic(noAsm)
}

func dotBF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32) {
	panic(noAsm)
}

func dotQ8_0RowsAVX2(w *byte, rb, n int, xq *int8, xd *float32, nb int, out *float32) {
	panic(noAsm)
}

func dotQ4_0RowsAVX2(w *byte, rb, n int, x *pairQ4, np int, tab *float32, out *float32) {
	panic(noAsm)
}

func quantizeQ8_0AVX2(x *float32, nb int, qs *int8, d *float32) { panic(noAsm) }
func quantizeQ4PairsAVX2(x *float32, nb int, p *pairQ4)         { panic(noAsm) }
func quantizeQ8KAVX2(x *float32, nb int, blocks *blockQ8K)      { panic(noAsm) }

func dotRowsF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32)  { panic(noAsm) }
func dotRowsBF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32) { panic(noAsm) }

func dotQ4_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32           { panic(noAsm) }
func dotQ5_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32           { panic(noAsm) }
func dotQ5_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32           { panic(noAsm) }
func dotQ5_KAVX2(w *byte, x *blockQ8K, nb int) float32                     { panic(noAsm) }
func dotQ3_KAVX2(w *byte, x *blockQ8K, nb int) float32                     { panic(noAsm) }
func dotQ2_KAVX2(w *byte, x *blockQ8K, nb int) float32                     { panic(noAsm) }
func dotQ5_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32) { panic(noAsm) }
func dotQ3_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32) { panic(noAsm) }

var hasWide, hasVNNI = false, false

func dotF32x4x8AVX512(x *float32, xstride int, w *float32, wstride, n int, out *[32]float32) {
	panic(noAsm)
}

func dotF32x4x8PartAVX512(x *float32, xstride int, w *float32, wstride, n int, acc *[256]float32, out *[32]float32, mode int) {
	panic(noAsm)
}

func dotQ8_0x8x4VNNI(w *byte, rb int, xq *int8, xd *float32, nb, qstride, dstride, rows int, out *[32]float32) {
	panic(noAsm)
}

func dotQ4_0x8x4VNNI(w *byte, rb int, x *pairQ4, np, xstride, rows int, out *[32]float32) {
	panic(noAsm)
}

func dotF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32) {
	panic(noAsm)
}

func dotBF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32) {
	panic(noAsm)
}

func dotQ4_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32) {
	panic(noAsm)
}

func dotQ6_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32) {
	panic(noAsm)
}

func qkCall(wide, f16 bool, nh, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32) {
	panic(noAsm)
}

func pvCall(cols int, f16 bool, nh int, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int) {
	panic(noAsm)
}

func toHalfAVX2(dst *uint16, src *float32, n int) { panic(noAsm) }
func fmaLoopAVX512(n int)                         { panic(noAsm) }
func vnniLoopAVX512(n int)                        { panic(noAsm) }
func fmaLoopAVX2(n int)                           { panic(noAsm) }
func int8LoopAVX2(n int)                          { panic(noAsm) }

func blockSumsI8AVX2(qs *int8, nb int, out *int32) { panic(noAsm) }

// Without the assembly the packed products run the Go twins (packGo).
var packVNNI, packAVX2 packKernels

// Nor the packed F32 ones (f32Go).
var f32AVX512, f32AVX2 f32Kernels

func attnQKQ8(q []float32, nq, hd int, k *KVRows, nb int, scale float32, out []float32, ostride int) {
	panic(noAsm)
}

func attnPVQ8(p []float32, pstride, nq, hd int, v *KVRows, cnt int, out []float32, ostride int) {
	panic(noAsm)
}

func qkPairCall(f16 bool, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32, kdelta int) {
	panic(noAsm)
}

func pvPairCall(f16 bool, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int) {
	panic(noAsm)
}

func pvQ8PairCall(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride, vdelta, sdelta int) {
	panic(noAsm)
}
