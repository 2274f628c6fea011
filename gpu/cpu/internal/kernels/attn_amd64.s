//go:build amd64 && !purego

#include "textflag.h"
#include "tree_amd64.h"

// Row kernels for attention and the single-row matrix product, AVX2 + FMA.
// Rows lie at a byte stride; row lengths k are multiples of 8 and > 0.

// TREE4 reduces Y0..Y3 to X0 (lane j = sum of the lanes of Yj).
#define TREE4 \
	VHADDPS      Y1, Y0, Y0 \
	VHADDPS      Y3, Y2, Y2 \
	VHADDPS      Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0

#define HSUM(y, x, t) \
	VEXTRACTF128 $1, y, t \
	VADDPS       t, x, x  \
	VHADDPS      x, x, x  \
	VHADDPS      x, x, x

// HSUMT sums the lanes of y into lane 0 of x (y's low half) in the order
// of TREE8 and TREE4, ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)), so that a
// row gives the same bits whichever step reduces it. t is clobbered.
#define HSUMT(y, x, t) \
	VHADDPS      y, y, y \
	VHADDPS      y, y, y \
	VEXTRACTF128 $1, y, t \
	VADDSS       t, x, x

// func dotRowsF32AVX2(x, w *float32, wstride, k, n int, out *float32, scale float32)
//
// out[r] = scale · Σ_i x[i]·w[r·wstride/4 + i] for r < n, i < k; k > 0.
// Eight rows at a time share the loads of x and reduce in one tree; then
// four, then one. The k mod 8 last elements load under a mask (Y14), x's
// into Y13. Every row has one accumulator and the same reduction order
// (TREE8, TREE4 and HSUMT agree), so its result does not depend on the
// step that computes it, nor on the rows beside it.
TEXT ·dotRowsF32AVX2(SB), NOSPLIT, $0-52
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         wstride+16(FP), BX
	MOVQ         k+24(FP), CX
	MOVQ         n+32(FP), DX
	MOVQ         out+40(FP), AX
	VBROADCASTSS scale+48(FP), Y15
	LEAQ         (BX)(BX*2), R10
	MOVQ         CX, R9
	ANDQ         $-8, CX
	ANDQ         $7, R9
	JZ           nomask
	// Tail mask: the last k mod 8 lanes come from tailmask<> at 32 − 4·(k mod 8).
	LEAQ         tailmask<>(SB), R11
	SHLQ         $2, R9
	NEGQ         R9
	VMOVDQU      32(R11)(R9*1), Y14
	LEAQ         (SI)(CX*4), R11
	VMASKMOVPS   (R11), Y14, Y13
	MOVQ         $1, R9
	JMP          start

nomask:
	XORQ R9, R9

start:
	// R9 = 1 when there is a masked tail; CX = k rounded down to 8.
	MOVQ R9, R8
	CMPQ DX, $8
	JLT  rows4

rows8:
	MOVQ   DI, R11
	LEAQ   (DI)(BX*4), R12
	MOVQ   SI, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R9
	TESTQ  R9, R9
	JZ     tail8

loop8:
	VMOVUPS     (R13), Y8
	VFMADD231PS (R11), Y8, Y0
	VFMADD231PS (R11)(BX*1), Y8, Y1
	VFMADD231PS (R11)(BX*2), Y8, Y2
	VFMADD231PS (R11)(R10*1), Y8, Y3
	VFMADD231PS (R12), Y8, Y4
	VFMADD231PS (R12)(BX*1), Y8, Y5
	VFMADD231PS (R12)(BX*2), Y8, Y6
	VFMADD231PS (R12)(R10*1), Y8, Y7
	ADDQ        $32, R11
	ADDQ        $32, R12
	ADDQ        $32, R13
	SUBQ        $8, R9
	JNZ         loop8

tail8:
	TESTQ       R8, R8
	JZ          reduce8
	VMASKMOVPS  (R11), Y14, Y8
	VFMADD231PS Y8, Y13, Y0
	VMASKMOVPS  (R11)(BX*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y1
	VMASKMOVPS  (R11)(BX*2), Y14, Y8
	VFMADD231PS Y8, Y13, Y2
	VMASKMOVPS  (R11)(R10*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y3
	VMASKMOVPS  (R12), Y14, Y8
	VFMADD231PS Y8, Y13, Y4
	VMASKMOVPS  (R12)(BX*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y5
	VMASKMOVPS  (R12)(BX*2), Y14, Y8
	VFMADD231PS Y8, Y13, Y6
	VMASKMOVPS  (R12)(R10*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y7

reduce8:
	TREE8
	VMULPS      Y15, Y0, Y0
	VMOVUPS     Y0, (AX)
	ADDQ        $32, AX
	LEAQ        (DI)(BX*8), DI
	SUBQ        $8, DX
	CMPQ        DX, $8
	JGE         rows8

rows4:
	CMPQ   DX, $4
	JLT    rows1
	MOVQ   DI, R11
	MOVQ   SI, R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   CX, R9
	TESTQ  R9, R9
	JZ     tail4

loop4:
	VMOVUPS     (R13), Y8
	VFMADD231PS (R11), Y8, Y0
	VFMADD231PS (R11)(BX*1), Y8, Y1
	VFMADD231PS (R11)(BX*2), Y8, Y2
	VFMADD231PS (R11)(R10*1), Y8, Y3
	ADDQ        $32, R11
	ADDQ        $32, R13
	SUBQ        $8, R9
	JNZ         loop4

tail4:
	TESTQ       R8, R8
	JZ          reduce4
	VMASKMOVPS  (R11), Y14, Y8
	VFMADD231PS Y8, Y13, Y0
	VMASKMOVPS  (R11)(BX*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y1
	VMASKMOVPS  (R11)(BX*2), Y14, Y8
	VFMADD231PS Y8, Y13, Y2
	VMASKMOVPS  (R11)(R10*1), Y14, Y8
	VFMADD231PS Y8, Y13, Y3

reduce4:
	TREE4
	VMULPS      X15, X0, X0
	VMOVUPS     X0, (AX)
	ADDQ        $16, AX
	LEAQ        (DI)(BX*4), DI
	SUBQ        $4, DX

rows1:
	TESTQ DX, DX
	JZ    done

row1:
	MOVQ   DI, R11
	MOVQ   SI, R13
	VXORPS Y0, Y0, Y0
	MOVQ   CX, R9
	TESTQ  R9, R9
	JZ     tail1

loop1:
	VMOVUPS     (R13), Y8
	VFMADD231PS (R11), Y8, Y0
	ADDQ        $32, R11
	ADDQ        $32, R13
	SUBQ        $8, R9
	JNZ         loop1

tail1:
	TESTQ       R8, R8
	JZ          reduce1
	VMASKMOVPS  (R11), Y14, Y8
	VFMADD231PS Y8, Y13, Y0

reduce1:
	HSUMT(Y0, X0, X1)
	VMULSS X15, X0, X0
	VMOVSS X0, (AX)
	ADDQ   $4, AX
	ADDQ   BX, DI
	DECQ   DX
	JNZ    row1

done:
	VZEROUPPER
	RET

// func axpyRowsF32AVX2(p, v *float32, vstride, k, n int, out *float32)
//
// out[i] += Σ_r p[r]·v[r·vstride/4 + i] for i < k, r < n; n > 0. Each group
// of 8 outputs keeps four accumulators over the rows.
TEXT ·axpyRowsF32AVX2(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), SI
	MOVQ v+8(FP), DI
	MOVQ vstride+16(FP), BX
	MOVQ k+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), AX
	LEAQ (BX)(BX*2), R10

chunk:
	MOVQ   SI, R11
	MOVQ   DI, R12
	MOVQ   DX, R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   R9, $4
	JLT    tail

loop4:
	VBROADCASTSS (R11), Y4
	VBROADCASTSS 4(R11), Y5
	VBROADCASTSS 8(R11), Y6
	VBROADCASTSS 12(R11), Y7
	VFMADD231PS  (R12), Y4, Y0
	VFMADD231PS  (R12)(BX*1), Y5, Y1
	VFMADD231PS  (R12)(BX*2), Y6, Y2
	VFMADD231PS  (R12)(R10*1), Y7, Y3
	ADDQ         $16, R11
	LEAQ         (R12)(BX*4), R12
	SUBQ         $4, R9
	CMPQ         R9, $4
	JGE          loop4

tail:
	// The last n mod 4 rows go to accumulators 0, 1, 2, as they would in
	// a longer run: the result for a row set does not depend on rows after
	// it that have weight 0.
	TESTQ        R9, R9
	JZ           sum
	VBROADCASTSS (R11), Y4
	VFMADD231PS  (R12), Y4, Y0
	CMPQ         R9, $2
	JLT          sum
	VBROADCASTSS 4(R11), Y5
	VFMADD231PS  (R12)(BX*1), Y5, Y1
	CMPQ         R9, $3
	JLT          sum
	VBROADCASTSS 8(R11), Y6
	VFMADD231PS  (R12)(BX*2), Y6, Y2

sum:
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VADDPS  (AX), Y0, Y0
	VMOVUPS Y0, (AX)
	ADDQ    $32, AX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     chunk
	VZEROUPPER
	RET

// HMAX sets every lane of X0 to the maximum of Y0's eight. Clobbers X1.
#define HMAX \
	VEXTRACTF128 $1, Y0, X1 \
	VMAXPS       X1, X0, X0 \
	VPERMILPS    $0x4e, X0, X1 \
	VMAXPS       X1, X0, X0 \
	VPERMILPS    $0xb1, X0, X1 \
	VMAXPS       X1, X0, X0

// func maxF32AVX2(x *float32, n int) float32
//
// The maximum of x[:n], n ≥ 8.
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	ADDQ    $32, SI
	SUBQ    $8, CX
	CMPQ    CX, $16
	JLT     tail

loop16:
	VMAXPS (SI), Y0, Y0
	VMAXPS 32(SI), Y1, Y1
	ADDQ   $64, SI
	SUBQ   $16, CX
	CMPQ   CX, $16
	JGE    loop16

tail:
	CMPQ CX, $8
	JLT  last

loop8:
	VMAXPS (SI), Y0, Y0
	ADDQ   $32, SI
	SUBQ   $8, CX
	CMPQ   CX, $8
	JGE    loop8

last:
	// The last n mod 8 elements: the 8 ending at x+n, which overlap
	// elements already seen.
	TESTQ  CX, CX
	JZ     done
	VMAXPS -32(SI)(CX*4), Y0, Y0

done:
	VMAXPS       Y1, Y0, Y0
	HMAX
	VMOVSS       X0, ret+16(FP)
	VZEROUPPER
	RET

// EXPCONST loads the constants of EXPNEG: Y14 log2e, Y13 ln2hi, Y12 ln2lo,
// Y11..Y8 1/720, 1/120, 1/24, 1/6, Y7 1/2, Y6 1, Y5 −87.
#define EXPCONST \
	VBROADCASTSS expc<>+0(SB), Y14  \
	VBROADCASTSS expc<>+4(SB), Y13  \
	VBROADCASTSS expc<>+8(SB), Y12  \
	VBROADCASTSS expc<>+12(SB), Y11 \
	VBROADCASTSS expc<>+16(SB), Y10 \
	VBROADCASTSS expc<>+20(SB), Y9  \
	VBROADCASTSS expc<>+24(SB), Y8  \
	VBROADCASTSS expc<>+28(SB), Y7  \
	VBROADCASTSS expc<>+32(SB), Y6  \
	VBROADCASTSS expc<>+36(SB), Y5

// EXPNEG sets Y3 = e**Y1 for Y1 ≤ 0, as expNeg: Y1 = k·ln2 + r with
// k = round(Y1·log2e), e**r by a degree-6 polynomial, k added to the
// exponent bits, 0 below −87. Clobbers Y1, Y2, Y4.
#define EXPNEG \
	VCMPPS       $0x1d, Y5, Y1, Y4 \
	VMULPS       Y14, Y1, Y2       \
	VROUNDPS     $0, Y2, Y2        \
	VFNMADD231PS Y13, Y2, Y1       \
	VFNMADD231PS Y12, Y2, Y1       \
	VMOVAPS      Y11, Y3           \
	VFMADD213PS  Y10, Y1, Y3       \
	VFMADD213PS  Y9, Y1, Y3        \
	VFMADD213PS  Y8, Y1, Y3        \
	VFMADD213PS  Y7, Y1, Y3        \
	VFMADD213PS  Y6, Y1, Y3        \
	VFMADD213PS  Y6, Y1, Y3        \
	VCVTPS2DQ    Y2, Y2            \
	VPSLLD       $23, Y2, Y2       \
	VPADDD       Y2, Y3, Y3        \
	VANDPS       Y4, Y3, Y3

// func cleanAVX2(dst, src *float32, n int) float32
//
// dst[i] = src[i] for i < n with NaN replaced by −Inf and +Inf by the
// largest float32; returns the maximum of dst[:n]. n is a multiple of 8,
// > 0.
TEXT ·cleanAVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS cleanc<>+0(SB), Y14
	VBROADCASTSS cleanc<>+4(SB), Y13
	VMOVAPS      Y14, Y0

loop:
	VMOVUPS   (SI), Y1
	VCMPPS    $3, Y1, Y1, Y2  // unordered: NaN
	VBLENDVPS Y2, Y14, Y1, Y1 // NaN → −Inf
	VMINPS    Y13, Y1, Y1     // +Inf → MaxFloat32
	VMOVUPS   Y1, (DI)
	VMAXPS    Y1, Y0, Y0
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       loop

	HMAX
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// TAILMASK sets R12 to the address of the mask whose first R9 (1…7)
// lanes are all ones and the rest zero: tailmask<> at 32 − 4·R9. Clobbers
// R9.
#define TAILMASK \
	LEAQ tailmask<>+32(SB), R12 \
	SHLQ $2, R9                 \
	SUBQ R9, R12

// SUMPD adds the eight floats of Y3 to the four float64 lanes of Y0, the
// low half first. Clobbers Y1 and X3.
#define SUMPD \
	VCVTPS2PD    X3, Y1     \
	VADDPD       Y1, Y0, Y0 \
	VEXTRACTF128 $1, Y3, X3 \
	VCVTPS2PD    X3, Y1     \
	VADDPD       Y1, Y0, Y0

// func sumExpAVX2(dst, x *float32, n int, m, scale float32) float64
//
// Returns the sum of e = exp((x[i] − m)·scale) for i < n, each lane's terms
// added in float64 in order; writes e to dst[i] unless dst is nil.
// (x[i] − m)·scale ≤ 0 or −Inf, n > 0.
TEXT ·sumExpAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS m+24(FP), Y15
	EXPCONST
	VXORPD       Y0, Y0, Y0
	MOVQ         CX, R9
	ANDQ         $7, R9
	ANDQ         $-8, CX
	JZ           tail

loop:
	VMOVUPS      (SI), Y1
	VSUBPS       Y15, Y1, Y1
	VBROADCASTSS scale+28(FP), Y2
	VMULPS       Y2, Y1, Y1
	EXPNEG
	TESTQ        DI, DI
	JZ           add
	VMOVUPS      Y3, (DI)
	ADDQ         $32, DI

add:
	SUMPD
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ  loop

tail:
	// The last n mod 8 elements, loaded and stored under the mask at R12;
	// the other lanes' terms are cleared before they are added.
	TESTQ R9, R9
	JZ    sum
	TAILMASK
	VMOVDQU      (R12), Y4
	VMASKMOVPS   (SI), Y4, Y1
	VSUBPS       Y15, Y1, Y1
	VBROADCASTSS scale+28(FP), Y2
	VMULPS       Y2, Y1, Y1
	EXPNEG
	VMOVDQU      (R12), Y4
	VANDPS       Y4, Y3, Y3
	TESTQ        DI, DI
	JZ           tailadd
	VMASKMOVPS   Y3, Y4, (DI)

tailadd:
	SUMPD

sum:
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	VUNPCKHPD    X0, X0, X1
	VADDSD       X1, X0, X0
	VMOVSD       X0, ret+32(FP)
	VZEROUPPER
	RET

// func siluMulAVX2(dst, gate, up *float32, n int)
//
// dst[i] = silu(gate[i])·up[i] for i < n, n > 0. With e = e**−|x|,
// silu(x) = x/(1+e) for x ≥ 0 and x·e/(1+e) for x < 0, so only EXPNEG is
// needed. The last n mod 8 elements load and store under the mask Y15, so
// every element takes the same path.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ dst+0(FP), DI
	MOVQ n+24(FP), CX
	EXPCONST
	MOVQ CX, R9
	ANDQ $7, R9
	ANDQ $-8, CX
	JZ   tail

loop:
	VMOVUPS   (SI), Y0
	VORPS     signbits<>(SB), Y0, Y1 // −|x|
	EXPNEG
	VADDPS    Y6, Y3, Y2             // 1 + e
	VMULPS    Y3, Y0, Y1             // x·e
	VBLENDVPS Y0, Y1, Y0, Y4         // x < 0 ? x·e : x
	VDIVPS    Y2, Y4, Y4
	VMULPS    (DX), Y4, Y4
	VMOVUPS   Y4, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       loop

tail:
	TESTQ R9, R9
	JZ    done
	TAILMASK
	VMOVDQU    (R12), Y15
	VMASKMOVPS (SI), Y15, Y0
	VORPS      signbits<>(SB), Y0, Y1
	EXPNEG
	VADDPS     Y6, Y3, Y2
	VMULPS     Y3, Y0, Y1
	VBLENDVPS  Y0, Y1, Y0, Y4
	VDIVPS     Y2, Y4, Y4
	VMASKMOVPS (DX), Y15, Y1
	VMULPS     Y1, Y4, Y4
	VMASKMOVPS Y4, Y15, (DI)

done:
	VZEROUPPER
	RET

DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+4(SB)/4, $0x3f317200  // ln2 high part, 0.693145751953125
DATA expc<>+8(SB)/4, $0x35bfbe8e  // ln2 low part, 1.428606765330187e-06
DATA expc<>+12(SB)/4, $0x3ab60b61 // 1/720
DATA expc<>+16(SB)/4, $0x3c088889 // 1/120
DATA expc<>+20(SB)/4, $0x3d2aaaab // 1/24
DATA expc<>+24(SB)/4, $0x3e2aaaab // 1/6
DATA expc<>+28(SB)/4, $0x3f000000 // 1/2
DATA expc<>+32(SB)/4, $0x3f800000 // 1
DATA expc<>+36(SB)/4, $0xc2ae0000 // −87
GLOBL expc<>(SB), RODATA|NOPTR, $40

DATA cleanc<>+0(SB)/4, $0xff800000 // −Inf
DATA cleanc<>+4(SB)/4, $0x7f7fffff // the largest float32
GLOBL cleanc<>(SB), RODATA|NOPTR, $8

DATA signbits<>+0(SB)/8, $0x8000000080000000
DATA signbits<>+8(SB)/8, $0x8000000080000000
DATA signbits<>+16(SB)/8, $0x8000000080000000
DATA signbits<>+24(SB)/8, $0x8000000080000000
GLOBL signbits<>(SB), RODATA|NOPTR, $32

// tailmask<>: eight all-ones words, then eight zeros.
DATA tailmask<>+0(SB)/8, $-1
DATA tailmask<>+8(SB)/8, $-1
DATA tailmask<>+16(SB)/8, $-1
DATA tailmask<>+24(SB)/8, $-1
DATA tailmask<>+32(SB)/8, $0
DATA tailmask<>+40(SB)/8, $0
DATA tailmask<>+48(SB)/8, $0
DATA tailmask<>+56(SB)/8, $0
GLOBL tailmask<>(SB), RODATA|NOPTR, $64

// DOTROWSW: DX rows of converted weights at DI (stride BX, R10 = 3·BX)
// against x at SI, CX floats (a multiple of 8, > 0), into AX, unscaled.
// LOADW(addr, reg) loads 8 weights as float32. One accumulator per row
// and the TREE8 order, as in DOT4X3. Clobbers DI, DX, R9, R11..R13.
#define DOTROWSW(LOADW) \
	CMPQ DX, $8                          \
	JLT  d4                              \
d8:                                          \
	MOVQ   DI, R11                       \
	LEAQ   (DI)(BX*4), R12               \
	MOVQ   SI, R13                       \
	MOVQ   CX, R9                        \
	VXORPS Y0, Y0, Y0                    \
	VXORPS Y1, Y1, Y1                    \
	VXORPS Y2, Y2, Y2                    \
	VXORPS Y3, Y3, Y3                    \
	VXORPS Y4, Y4, Y4                    \
	VXORPS Y5, Y5, Y5                    \
	VXORPS Y6, Y6, Y6                    \
	VXORPS Y7, Y7, Y7                    \
d8loop:                                      \
	VMOVUPS     (R13), Y8                \
	LOADW((R11), Y9)                     \
	VFMADD231PS Y9, Y8, Y0               \
	LOADW((R11)(BX*1), Y9)               \
	VFMADD231PS Y9, Y8, Y1               \
	LOADW((R11)(BX*2), Y9)               \
	VFMADD231PS Y9, Y8, Y2               \
	LOADW((R11)(R10*1), Y9)              \
	VFMADD231PS Y9, Y8, Y3               \
	LOADW((R12), Y9)                     \
	VFMADD231PS Y9, Y8, Y4               \
	LOADW((R12)(BX*1), Y9)               \
	VFMADD231PS Y9, Y8, Y5               \
	LOADW((R12)(BX*2), Y9)               \
	VFMADD231PS Y9, Y8, Y6               \
	LOADW((R12)(R10*1), Y9)              \
	VFMADD231PS Y9, Y8, Y7               \
	ADDQ        $16, R11                 \
	ADDQ        $16, R12                 \
	ADDQ        $32, R13                 \
	SUBQ        $8, R9                   \
	JNZ         d8loop                   \
	TREE8                                \
	VMOVUPS     Y0, (AX)                 \
	ADDQ        $32, AX                  \
	LEAQ        (DI)(BX*8), DI           \
	SUBQ        $8, DX                   \
	CMPQ        DX, $8                   \
	JGE         d8                       \
d4:                                          \
	CMPQ   DX, $4                        \
	JLT    d1                            \
	MOVQ   DI, R11                       \
	MOVQ   SI, R13                       \
	MOVQ   CX, R9                        \
	VXORPS Y0, Y0, Y0                    \
	VXORPS Y1, Y1, Y1                    \
	VXORPS Y2, Y2, Y2                    \
	VXORPS Y3, Y3, Y3                    \
d4loop:                                      \
	VMOVUPS     (R13), Y8                \
	LOADW((R11), Y9)                     \
	VFMADD231PS Y9, Y8, Y0               \
	LOADW((R11)(BX*1), Y9)               \
	VFMADD231PS Y9, Y8, Y1               \
	LOADW((R11)(BX*2), Y9)               \
	VFMADD231PS Y9, Y8, Y2               \
	LOADW((R11)(R10*1), Y9)              \
	VFMADD231PS Y9, Y8, Y3               \
	ADDQ        $16, R11                 \
	ADDQ        $32, R13                 \
	SUBQ        $8, R9                   \
	JNZ         d4loop                   \
	TREE4                                \
	VMOVUPS     X0, (AX)                 \
	ADDQ        $16, AX                  \
	LEAQ        (DI)(BX*4), DI           \
	SUBQ        $4, DX                   \
d1:                                          \
	TESTQ DX, DX                         \
	JZ    ddone                          \
d1row:                                       \
	MOVQ   DI, R11                       \
	MOVQ   SI, R13                       \
	MOVQ   CX, R9                        \
	VXORPS Y0, Y0, Y0                    \
d1loop:                                      \
	VMOVUPS     (R13), Y8                \
	LOADW((R11), Y9)                     \
	VFMADD231PS Y9, Y8, Y0               \
	ADDQ        $16, R11                 \
	ADDQ        $32, R13                 \
	SUBQ        $8, R9                   \
	JNZ         d1loop                   \
	HSUMT(Y0, X0, X1)                    \
	VMOVSS      X0, (AX)                 \
	ADDQ        $4, AX                   \
	ADDQ        BX, DI                   \
	DECQ        DX                       \
	JNZ         d1row                    \
ddone:

#define LOADF16R(a, r) VCVTPH2PS a, r
#define LOADBF16R(a, r) VPMOVZXWD a, r; VPSLLD $16, r, r

// func dotRowsF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32)
TEXT ·dotRowsF16AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ wstride+16(FP), BX
	MOVQ k+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), AX
	LEAQ (BX)(BX*2), R10
	DOTROWSW(LOADF16R)
	VZEROUPPER
	RET

// func dotRowsBF16AVX2(x *float32, w *uint16, wstride, k, n int, out *float32)
TEXT ·dotRowsBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ wstride+16(FP), BX
	MOVQ k+24(FP), CX
	MOVQ n+32(FP), DX
	MOVQ out+40(FP), AX
	LEAQ (BX)(BX*2), R10
	DOTROWSW(LOADBF16R)
	VZEROUPPER
	RET

// func firstEqAVX2(x *float32, n int, m float32) int
// The index of the first of x[:n] equal to m, or n if none; n is a
// multiple of 8 and > 0. Four vectors a round: their comparisons are
// or-ed and tested once, and the round that holds a match is looked at
// again a vector at a time.
TEXT ·firstEqAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y0
	XORQ         AX, AX
	MOVQ         CX, BX
	ANDQ         $-32, BX

round:
	CMPQ      AX, BX
	JGE       single
	VCMPPS    $0, (SI)(AX*4), Y0, Y1
	VCMPPS    $0, 32(SI)(AX*4), Y0, Y2
	VCMPPS    $0, 64(SI)(AX*4), Y0, Y3
	VCMPPS    $0, 96(SI)(AX*4), Y0, Y4
	VORPS     Y1, Y2, Y2
	VORPS     Y3, Y4, Y4
	VORPS     Y2, Y4, Y4
	VMOVMSKPS Y4, DX
	TESTL     DX, DX
	JNZ       single
	ADDQ      $32, AX
	JMP       round

single:
	CMPQ      AX, CX
	JGE       none
	VCMPPS    $0, (SI)(AX*4), Y0, Y1
	VMOVMSKPS Y1, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $8, AX
	JMP       single

found:
	BSFL       DX, DX
	ADDQ       DX, AX
	VZEROUPPER
	MOVQ       AX, ret+24(FP)
	RET

none:
	VZEROUPPER
	MOVQ       CX, ret+24(FP)
	RET
