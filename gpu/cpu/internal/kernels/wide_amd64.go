//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// hasWide reports the AVX-512 tile kernels (wide_amd64.s): F, BW, DQ and
// VL; hasVNNI adds AVX512-VNNI for the 8-bit ones. Both also need useAsm.
var (
	hasWide = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL
	hasVNNI = hasWide && cpu.X86.HasAVX512VNNI
)

//go:noescape
func dotF32x4x8AVX512(x *float32, xstride int, w *float32, wstride, n int, out *[32]float32)

//go:noescape
func dotF32x4x8PartAVX512(x *float32, xstride int, w *float32, wstride, n int, acc *[256]float32, out *[32]float32, mode int)

//go:noescape
func dotQ8_0x8x4VNNI(w *byte, rb int, xq *int8, xd *float32, nb, qstride, dstride, rows int, out *[32]float32)

//go:noescape
func dotQ4_0x8x4VNNI(w *byte, rb int, x *pairQ4, np, xstride, rows int, out *[32]float32)

//go:noescape
func dotF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32)

//go:noescape
func dotBF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32)

//go:noescape
func dotQ4_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32)

// dotQ6_Kx4x2AVX512 lies in quant_amd64.s, beside the Q6_K tables.
//
//go:noescape
func dotQ6_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32)
