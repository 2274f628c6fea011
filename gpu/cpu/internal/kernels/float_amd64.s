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
