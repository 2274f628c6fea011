//go:build amd64 && !purego

#include "textflag.h"

// Float kernels: f32, f16 and bf16 weights against float32 activations,
// AVX2 + FMA (+ F16C). Element counts are multiples of 8 and > 0.

// HSUM reduces the 8 lanes of y to lane 0 of x (x is y's low half); t is
// clobbered.
// Prefetch distance for the weight stream, in bytes.
#define PFD 768

#define HSUM(y, x, t) \
	VEXTRACTF128 $1, y, t \
	VADDPS       t, x, x  \
	VHADDPS      x, x, x  \
	VHADDPS      x, x, x

// REDUCE4 sums each of Y0..Y3 across lanes and stores the four sums to
// (AX); Y1 and Y2 are clobbered.
#define REDUCE4 \
	VHADDPS      Y1, Y0, Y0 \
	VHADDPS      Y3, Y2, Y2 \
	VHADDPS      Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0 \
	VMOVUPS      X0, (AX)

// DOT1 is the body of the single-row float kernels: LOADW(off, reg) loads 8
// weights at DI+off as float32 into reg; WSTEP is the weight bytes of 32
// elements.
#define DOT1(LOADW, WSTEP, WSTEP8) \
	VXORPS Y0, Y0, Y0    \
	VXORPS Y1, Y1, Y1    \
	VXORPS Y2, Y2, Y2    \
	VXORPS Y3, Y3, Y3    \
	CMPQ   CX, $32       \
	JLT    tail          \
loop:                        \
	LOADW(0, Y4)                \
	LOADW(WSTEP8, Y5)           \
	LOADW(2*WSTEP8, Y6)         \
	LOADW(3*WSTEP8, Y7)         \
	PREFETCHT0 PFD(DI)          \
	PREFETCHT0 PFD+64(DI)       \
	VFMADD231PS (SI), Y4, Y0    \
	VFMADD231PS 32(SI), Y5, Y1  \
	VFMADD231PS 64(SI), Y6, Y2  \
	VFMADD231PS 96(SI), Y7, Y3  \
	ADDQ        $128, SI        \
	ADDQ        $WSTEP, DI      \
	SUBQ        $32, CX         \
	CMPQ        CX, $32         \
	JGE         loop            \
tail:                        \
	TESTQ CX, CX                \
	JZ    done                  \
loop8:                       \
	LOADW(0, Y4)                \
	VFMADD231PS (SI), Y4, Y0    \
	ADDQ        $32, SI         \
	ADDQ        $WSTEP8, DI     \
	SUBQ        $8, CX          \
	JNZ         loop8           \
done:                        \
	VADDPS Y1, Y0, Y0           \
	VADDPS Y3, Y2, Y2           \
	VADDPS Y2, Y0, Y0           \
	HSUM(Y0, X0, X1)

#define LOADF32(off, r) VMOVUPS off(DI), r
#define LOADF16(off, r) VCVTPH2PS off(DI), r
#define LOADBF16(off, r) VPMOVZXWD off(DI), r; VPSLLD $16, r, r

// DOT4 is the body of the four-row float kernels: rows at SI, SI+BX,
// SI+2·BX and R8 = SI+3·BX, one weight row at DI, 16 elements a step with
// two accumulators per row.
#define DOT4(LOADW, WSTEP16, WSTEP8) \
	LEAQ   (SI)(BX*2), R8       \
	ADDQ   BX, R8               \
	VXORPS Y0, Y0, Y0           \
	VXORPS Y1, Y1, Y1           \
	VXORPS Y2, Y2, Y2           \
	VXORPS Y3, Y3, Y3           \
	VXORPS Y4, Y4, Y4           \
	VXORPS Y5, Y5, Y5           \
	VXORPS Y6, Y6, Y6           \
	VXORPS Y7, Y7, Y7           \
	CMPQ   CX, $16              \
	JLT    tail                 \
loop:                               \
	LOADW(0, Y8)                       \
	LOADW(WSTEP8, Y9)                  \
	PREFETCHT0 PFD(DI)                 \
	VFMADD231PS (SI), Y8, Y0           \
	VFMADD231PS (SI)(BX*1), Y8, Y1     \
	VFMADD231PS (SI)(BX*2), Y8, Y2     \
	VFMADD231PS (R8), Y8, Y3           \
	VFMADD231PS 32(SI), Y9, Y4         \
	VFMADD231PS 32(SI)(BX*1), Y9, Y5   \
	VFMADD231PS 32(SI)(BX*2), Y9, Y6   \
	VFMADD231PS 32(R8), Y9, Y7         \
	ADDQ        $64, SI                \
	ADDQ        $64, R8                \
	ADDQ        $WSTEP16, DI           \
	SUBQ        $16, CX                \
	CMPQ        CX, $16                \
	JGE         loop                   \
tail:                               \
	TESTQ CX, CX                       \
	JZ    done                         \
	LOADW(0, Y8)                       \
	VFMADD231PS (SI), Y8, Y0           \
	VFMADD231PS (SI)(BX*1), Y8, Y1     \
	VFMADD231PS (SI)(BX*2), Y8, Y2     \
	VFMADD231PS (R8), Y8, Y3           \
done:                               \
	VADDPS Y4, Y0, Y0                  \
	VADDPS Y5, Y1, Y1                  \
	VADDPS Y6, Y2, Y2                  \
	VADDPS Y7, Y3, Y3                  \
	REDUCE4

// func dotF32AVX2(x, w *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	DOT1(LOADF32, 128, 32)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX2(x *float32, w *uint16, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	DOT1(LOADF16, 64, 16)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotBF16AVX2(x *float32, w *uint16, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	DOT1(LOADBF16, 64, 16)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF32x4AVX2(x *float32, xstride int, w *float32, n int, out *[4]float32)
TEXT ·dotF32x4AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ n+24(FP), CX
	MOVQ out+32(FP), AX
	DOT4(LOADF32, 64, 32)
	VZEROUPPER
	RET

// func dotF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32)
TEXT ·dotF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ n+24(FP), CX
	MOVQ out+32(FP), AX
	DOT4(LOADF16, 32, 16)
	VZEROUPPER
	RET

// func dotBF16x4AVX2(x *float32, xstride int, w *uint16, n int, out *[4]float32)
TEXT ·dotBF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ n+24(FP), CX
	MOVQ out+32(FP), AX
	DOT4(LOADBF16, 32, 16)
	VZEROUPPER
	RET

// func sumF32AVX2(x *float32, n int) float32
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-20
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JLT    tail

loop:
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	ADDQ   $128, SI
	SUBQ   $32, CX
	CMPQ   CX, $32
	JGE    loop

tail:
	TESTQ CX, CX
	JZ    done

loop8:
	VADDPS (SI), Y0, Y0
	ADDQ   $32, SI
	SUBQ   $8, CX
	JNZ    loop8

done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// DOT4X3 is the body of the 4×3 tile kernels: four activation rows at SI,
// SI+BX, SI+2·BX and R8 = SI+3·BX against three weight rows at DI, DI+DX
// and DI+2·DX, 8 elements a step for CX elements (a multiple of 8, maybe
// 0). Twelve accumulators, Y(3i+j) for x row i and weight row j, reduce to
// out[3i+j] at AX. LOADW(addr, reg) loads 8 weights as float32; WSTEP8 is
// their size in bytes; TAIL may add the last elements.
#define DOT4X3(LOADW, WSTEP8, TAIL) \
	LEAQ   (SI)(BX*2), R8               \
	ADDQ   BX, R8                       \
	VXORPS Y0, Y0, Y0                   \
	VXORPS Y1, Y1, Y1                   \
	VXORPS Y2, Y2, Y2                   \
	VXORPS Y3, Y3, Y3                   \
	VXORPS Y4, Y4, Y4                   \
	VXORPS Y5, Y5, Y5                   \
	VXORPS Y6, Y6, Y6                   \
	VXORPS Y7, Y7, Y7                   \
	VXORPS Y8, Y8, Y8                   \
	VXORPS Y9, Y9, Y9                   \
	VXORPS Y10, Y10, Y10                \
	VXORPS Y11, Y11, Y11                \
	TESTQ  CX, CX                       \
	JZ     tail                         \
loop:                                       \
	LOADW((DI), Y12)                    \
	LOADW((DI)(DX*1), Y13)              \
	LOADW((DI)(DX*2), Y14)              \
	VMOVUPS     (SI), Y15               \
	VFMADD231PS Y12, Y15, Y0            \
	VFMADD231PS Y13, Y15, Y1            \
	VFMADD231PS Y14, Y15, Y2            \
	VMOVUPS     (SI)(BX*1), Y15         \
	VFMADD231PS Y12, Y15, Y3            \
	VFMADD231PS Y13, Y15, Y4            \
	VFMADD231PS Y14, Y15, Y5            \
	VMOVUPS     (SI)(BX*2), Y15         \
	VFMADD231PS Y12, Y15, Y6            \
	VFMADD231PS Y13, Y15, Y7            \
	VFMADD231PS Y14, Y15, Y8            \
	VMOVUPS     (R8), Y15               \
	VFMADD231PS Y12, Y15, Y9            \
	VFMADD231PS Y13, Y15, Y10           \
	VFMADD231PS Y14, Y15, Y11           \
	ADDQ        $32, SI                 \
	ADDQ        $32, R8                 \
	ADDQ        $WSTEP8, DI             \
	SUBQ        $8, CX                  \
	JNZ         loop                    \
tail:                                       \
	TAIL                                \
	VHADDPS      Y1, Y0, Y0             \
	VHADDPS      Y3, Y2, Y2             \
	VHADDPS      Y5, Y4, Y4             \
	VHADDPS      Y7, Y6, Y6             \
	VHADDPS      Y2, Y0, Y0             \
	VHADDPS      Y6, Y4, Y4             \
	VPERM2F128   $0x20, Y4, Y0, Y1      \
	VPERM2F128   $0x31, Y4, Y0, Y2      \
	VADDPS       Y2, Y1, Y0             \
	VMOVUPS      Y0, (AX)               \
	VHADDPS      Y9, Y8, Y8             \
	VHADDPS      Y11, Y10, Y10          \
	VHADDPS      Y10, Y8, Y8            \
	VEXTRACTF128 $1, Y8, X9             \
	VADDPS       X9, X8, X8             \
	VMOVUPS      X8, 32(AX)

// TAILF32 adds the last R9 < 8 elements of the F32 tile, loaded under a
// mask; accumulator Y11 waits in 0(SP) while its register holds x.
#define TAILF32 \
	TESTQ       R9, R9                 \
	JZ          tdone                  \
	LEAQ        f32tail<>+32(SB), R10 \
	SHLQ        $2, R9                 \
	SUBQ        R9, R10                \
	VMOVUPS     Y11, 0(SP)             \
	VMOVDQU     (R10), Y15             \
	VMASKMOVPS  (DI), Y15, Y12         \
	VMASKMOVPS  (DI)(DX*1), Y15, Y13   \
	VMASKMOVPS  (DI)(DX*2), Y15, Y14   \
	VMASKMOVPS  (SI), Y15, Y11         \
	VFMADD231PS Y12, Y11, Y0           \
	VFMADD231PS Y13, Y11, Y1           \
	VFMADD231PS Y14, Y11, Y2           \
	VMASKMOVPS  (SI)(BX*1), Y15, Y11   \
	VFMADD231PS Y12, Y11, Y3           \
	VFMADD231PS Y13, Y11, Y4           \
	VFMADD231PS Y14, Y11, Y5           \
	VMASKMOVPS  (SI)(BX*2), Y15, Y11   \
	VFMADD231PS Y12, Y11, Y6           \
	VFMADD231PS Y13, Y11, Y7           \
	VFMADD231PS Y14, Y11, Y8           \
	VMASKMOVPS  (R8), Y15, Y11         \
	VFMADD231PS Y12, Y11, Y9           \
	VFMADD231PS Y13, Y11, Y10          \
	VFMADD213PS 0(SP), Y14, Y11        \
tdone:

#define NOTAIL

#define LOADF32A(a, r) VMOVUPS a, r
#define LOADF16A(a, r) VCVTPH2PS a, r
#define LOADBF16A(a, r) VPMOVZXWD a, r; VPSLLD $16, r, r

// func dotF32x4x3AVX2(x *float32, xstride int, w *float32, wstride, n int, out *[12]float32)
//
// Any n > 0: the last n mod 8 elements load under a mask.
TEXT ·dotF32x4x3AVX2(SB), NOSPLIT, $32-48
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ out+40(FP), AX
	MOVQ CX, R9
	ANDQ $7, R9
	ANDQ $-8, CX
	DOT4X3(LOADF32A, 32, TAILF32)
	VZEROUPPER
	RET

// func dotF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32)
TEXT ·dotF16x4x3AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ out+40(FP), AX
	DOT4X3(LOADF16A, 16, NOTAIL)
	VZEROUPPER
	RET

// func dotBF16x4x3AVX2(x *float32, xstride int, w *uint16, wstride, n int, out *[12]float32)
TEXT ·dotBF16x4x3AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ wstride+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ out+40(FP), AX
	DOT4X3(LOADBF16A, 16, NOTAIL)
	VZEROUPPER
	RET

// f32tail<>: eight all-ones words, then eight zeros; the mask of the last
// r elements starts at 32 − 4r.
DATA f32tail<>+0(SB)/8, $-1
DATA f32tail<>+8(SB)/8, $-1
DATA f32tail<>+16(SB)/8, $-1
DATA f32tail<>+24(SB)/8, $-1
DATA f32tail<>+32(SB)/8, $0
DATA f32tail<>+40(SB)/8, $0
DATA f32tail<>+48(SB)/8, $0
DATA f32tail<>+56(SB)/8, $0
GLOBL f32tail<>(SB), RODATA|NOPTR, $64
