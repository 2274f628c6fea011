//go:build amd64 && !purego

#include "textflag.h"
#include "tree_amd64.h"
#include "q4k_amd64.h"

// Wide tile kernels, AVX-512 (F, BW, DQ, VL) and AVX512-VNNI, for batches
// of four or more activation rows.
//
// They give every dot product the bits of the AVX2 kernels: a ZMM register
// holds two 8-lane accumulators side by side, one per weight row of a
// pair, [acc(x, w₀) | acc(x, w₁)], and each half is updated with the same
// operations, in the same order, as the YMM accumulator of the AVX2 kernel
// for that (activation row, weight row). The activation row is broadcast to
// both halves. At the end every half is reduced with REDUCE4's tree. So the
// wider registers only do two of the AVX2 kernel's dot products at once,
// and a row's result still does not depend on which kernel, or which batch,
// computed it.

// Weights stream from memory once per call in decode steps (a batch of a
// few rows), so each weight row is prefetched PFDW bytes ahead; prompt
// steps reuse them from the caches and lose nothing by it. Measured with
// BenchmarkMatMulStream (Q8_0, 16 rows, one thread, Zen 4/5-class EPYC):
// 62 GMAC/s without, 46 at 256 bytes, 77 at 2 KiB, 85-87 at 4-8 KiB.
#define PFDW 4096

// PREFETCH4(a, b, c, d): the four weight rows' lines PFDW bytes ahead.
#define PREFETCH4(a, b, c, d) \
	PREFETCHT0 PFDW a \
	PREFETCHT0 PFDW b \
	PREFETCHT0 PFDW c \
	PREFETCHT0 PFDW d

// HIGH8(z0..z7) extracts the high halves of eight accumulators to Y16..Y23;
// MOVE8(y0..y7) copies eight YMM registers to Y0..Y7 (for TREE8).
#define HIGH8(z0, z1, z2, z3, z4, z5, z6, z7) \
	VEXTRACTF32X8 $1, z0, Y16 \
	VEXTRACTF32X8 $1, z1, Y17 \
	VEXTRACTF32X8 $1, z2, Y18 \
	VEXTRACTF32X8 $1, z3, Y19 \
	VEXTRACTF32X8 $1, z4, Y20 \
	VEXTRACTF32X8 $1, z5, Y21 \
	VEXTRACTF32X8 $1, z6, Y22 \
	VEXTRACTF32X8 $1, z7, Y23

#define MOVE8(y0, y1, y2, y3, y4, y5, y6, y7) \
	VMOVAPS y0, Y0 \
	VMOVAPS y1, Y1 \
	VMOVAPS y2, Y2 \
	VMOVAPS y3, Y3 \
	VMOVAPS y4, Y4 \
	VMOVAPS y5, Y5 \
	VMOVAPS y6, Y6 \
	VMOVAPS y7, Y7

// ZERO8 clears eight registers.
#define ZERO8(a, b, c, d, e, f, g, h) \
	VPXORD a, a, a \
	VPXORD b, b, b \
	VPXORD c, c, c \
	VPXORD d, d, d \
	VPXORD e, e, e \
	VPXORD f, f, f \
	VPXORD g, g, g \
	VPXORD h, h, h

// WREDUCE4(a, b, c, d, off): the lanes of each of Ya..Yd summed in the
// REDUCE4 order, the four sums stored at off(AX). Clobbers a, b, c.
#define WREDUCE4(a, b, c, d, xa, xb, off) \
	VHADDPS      b, a, a    \
	VHADDPS      d, c, c    \
	VHADDPS      c, a, a    \
	VEXTRACTF128 $1, a, xb  \
	VADDPS       xb, xa, xa \
	VMOVUPS      xa, off(AX)

// WPAIR(z0, z1, z2, z3, off0, off1): the four accumulators z0..z3 hold
// [acc(xᵢ, w₀) | acc(xᵢ, w₁)] for activation rows i = 0..3; stores the four
// sums of w₀ at off0(AX) and of w₁ at off1(AX). The high halves go through
// Y12..Y15 (VHADDPS has no EVEX form, so only Y0..Y15 can be reduced).
// Clobbers z0..z2 and Y12..Y14.
#define WPAIR(z0, z1, z2, z3, y0, y1, y2, y3, x0, x1, off0, off1) \
	VEXTRACTF32X8 $1, z0, Y12 \
	VEXTRACTF32X8 $1, z1, Y13 \
	VEXTRACTF32X8 $1, z2, Y14 \
	VEXTRACTF32X8 $1, z3, Y15 \
	WREDUCE4(y0, y1, y2, y3, x0, x1, off0) \
	WREDUCE4(Y12, Y13, Y14, Y15, X12, X13, off1)

#define PAIRF32(a0, a1, z, y) \
	VMOVUPS      a0, y \
	VINSERTF32X8 $1, a1, z, z

#define PAIRF16(a0, a1, z, y) \
	VCVTPH2PS    a0, y   \
	VCVTPH2PS    a1, Y24 \
	VINSERTF32X8 $1, Y24, z, z

#define PAIRBF16(a0, a1, z, y) \
	VPMOVZXWD    a0, y      \
	VPSLLD       $16, y, y  \
	VPMOVZXWD    a1, Y24    \
	VPSLLD       $16, Y24, Y24 \
	VINSERTF32X8 $1, Y24, z, z

// DOT4X8(LOADPAIR, WSTEP8) is the body of the 4×8 float tile kernels (all
// three take the same arguments): four activation rows at x (stride
// xstride) against eight weight rows at w (stride wstride), n elements,
// into out. LOADPAIR(a0, a1, z, y) loads 8 weights
// of rows a0 and a1 as float32 into z = [a0 | a1] (y is z's low half);
// WSTEP8 is the bytes of 8 weights. Weight pairs (0,1) (2,3) (4,5) (6,7)
// load into Z16..Z19. At the end the last pair's accumulators go first to
// Z24..Z27: its high halves need Y12..Y15 free.
#define DOT4X8(LOADPAIR, WSTEP8) \
	DOT4X8ARGS \
	MOVQ out+40(FP), AX \
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7) \
	ZERO8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT4X8LOOP(LOADPAIR, WSTEP8, PF8) \
	DOT4X8REDUCE

// DOT4X8ARGS loads the arguments x, xstride, w, wstride and n of the 4×8
// float kernels, and the row addresses DOT4X8LOOP uses.
#define DOT4X8ARGS \
	MOVQ x+0(FP), SI \
	MOVQ xstride+8(FP), BX \
	MOVQ w+16(FP), DI \
	MOVQ wstride+24(FP), DX \
	MOVQ n+32(FP), CX \
	LEAQ (SI)(BX*2), R10 \
	ADDQ BX, R10 \
	LEAQ (DI)(DX*2), R8 \
	ADDQ DX, R8 \
	LEAQ (DI)(DX*4), R9 \
	ADDQ DX, R9 \
	ADDQ DX, R9

// PF8() prefetches the eight weight rows PFDW bytes ahead (DOT4X8LOOP's
// addressing); NOPF() does nothing.
#define PF8() \
	PREFETCH4((DI), (DI)(DX*1), (DI)(DX*2), (R8)) \
	PREFETCH4((DI)(DX*4), (R8)(DX*2), (R9), (R8)(DX*4))
#define NOPF()

// DOT4X8LOOP(LOADPAIR, WSTEP8, PF) adds n elements' products into the
// accumulators Z0..Z15, PF() a step: PF8 where the weights stream from
// memory, NOPF where a part of them is in the L1 cache already.
#define DOT4X8LOOP(LOADPAIR, WSTEP8, PF) \
loop: \
	PF() \
	LOADPAIR((DI), (DI)(DX*1), Z16, Y16) \
	LOADPAIR((DI)(DX*2), (R8), Z17, Y17) \
	LOADPAIR((DI)(DX*4), (R8)(DX*2), Z18, Y18) \
	LOADPAIR((R9), (R8)(DX*4), Z19, Y19) \
	VBROADCASTF32X8 (SI), Z20 \
	VBROADCASTF32X8 (SI)(BX*1), Z21 \
	VBROADCASTF32X8 (SI)(BX*2), Z22 \
	VBROADCASTF32X8 (R10), Z23 \
	VFMADD231PS     Z16, Z20, Z0 \
	VFMADD231PS     Z16, Z21, Z1 \
	VFMADD231PS     Z16, Z22, Z2 \
	VFMADD231PS     Z16, Z23, Z3 \
	VFMADD231PS     Z17, Z20, Z4 \
	VFMADD231PS     Z17, Z21, Z5 \
	VFMADD231PS     Z17, Z22, Z6 \
	VFMADD231PS     Z17, Z23, Z7 \
	VFMADD231PS     Z18, Z20, Z8 \
	VFMADD231PS     Z18, Z21, Z9 \
	VFMADD231PS     Z18, Z22, Z10 \
	VFMADD231PS     Z18, Z23, Z11 \
	VFMADD231PS     Z19, Z20, Z12 \
	VFMADD231PS     Z19, Z21, Z13 \
	VFMADD231PS     Z19, Z22, Z14 \
	VFMADD231PS     Z19, Z23, Z15 \
	ADDQ            $32, SI \
	ADDQ            $32, R10 \
	ADDQ            $WSTEP8, DI \
	ADDQ            $WSTEP8, R8 \
	ADDQ            $WSTEP8, R9 \
	SUBQ            $8, CX \
	JNZ             loop

// DOT4X8REDUCE sums the accumulators Z0..Z15 into the 32 floats at AX.
#define DOT4X8REDUCE \
	VMOVAPS Z12, Z24 \
	VMOVAPS Z13, Z25 \
	VMOVAPS Z14, Z26 \
	VMOVAPS Z15, Z27 \
	WPAIR(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, 0, 16) \
	WPAIR(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, 32, 48) \
	WPAIR(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, X8, X9, 64, 80) \
	VMOVAPS Z24, Z0 \
	VMOVAPS Z25, Z1 \
	VMOVAPS Z26, Z2 \
	VMOVAPS Z27, Z3 \
	WPAIR(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, 96, 112)

// func dotF32x4x8AVX512(x *float32, xstride int, w *float32, wstride, n int, out *[32]float32)
//
// out[4j+i] = x row i · w row j for four activation rows (xstride bytes
// apart) and eight weight rows (wstride bytes apart), n > 0 a multiple of
// 8. Each (i, j) accumulates 8 elements a step in one 8-lane accumulator,
// as dotF32x4x3AVX2 does (and the F16 and BF16 forms as dotF16x4x3AVX2 and
// dotBF16x4x3AVX2: the weights convert to float32 in the same way).
TEXT ·dotF32x4x8AVX512(SB), NOSPLIT, $0-48
	DOT4X8(PAIRF32, 32)
	VZEROUPPER
	RET

// func dotF32x4x8PartAVX512(x *float32, xstride int, w *float32, wstride, n int, acc *[256]float32, out *[32]float32, mode int)
//
// dotF32x4x8AVX512 over a part of the columns, the sixteen accumulators
// carried in acc between parts: mode&1 starts from acc (else from zero),
// mode&2 ends by reducing into out as dotF32x4x8AVX512 does (else the
// accumulators go back to acc). Carried exactly, they give the bits of one
// call over all the columns; a weight tile's part then stays in the L1
// cache for every activation row group.
TEXT ·dotF32x4x8PartAVX512(SB), NOSPLIT, $0-64
	DOT4X8ARGS
	MOVQ  acc+40(FP), R11
	MOVQ  mode+56(FP), R12
	TESTQ $1, R12
	JNZ   load
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ZERO8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	JMP   body

load:
	VMOVUPS 0(R11), Z0
	VMOVUPS 64(R11), Z1
	VMOVUPS 128(R11), Z2
	VMOVUPS 192(R11), Z3
	VMOVUPS 256(R11), Z4
	VMOVUPS 320(R11), Z5
	VMOVUPS 384(R11), Z6
	VMOVUPS 448(R11), Z7
	VMOVUPS 512(R11), Z8
	VMOVUPS 576(R11), Z9
	VMOVUPS 640(R11), Z10
	VMOVUPS 704(R11), Z11
	VMOVUPS 768(R11), Z12
	VMOVUPS 832(R11), Z13
	VMOVUPS 896(R11), Z14
	VMOVUPS 960(R11), Z15

body:
	DOT4X8LOOP(PAIRF32, 32, NOPF)
	TESTQ $2, R12
	JNZ   final
	VMOVUPS Z0, 0(R11)
	VMOVUPS Z1, 64(R11)
	VMOVUPS Z2, 128(R11)
	VMOVUPS Z3, 192(R11)
	VMOVUPS Z4, 256(R11)
	VMOVUPS Z5, 320(R11)
	VMOVUPS Z6, 384(R11)
	VMOVUPS Z7, 448(R11)
	VMOVUPS Z8, 512(R11)
	VMOVUPS Z9, 576(R11)
	VMOVUPS Z10, 640(R11)
	VMOVUPS Z11, 704(R11)
	VMOVUPS Z12, 768(R11)
	VMOVUPS Z13, 832(R11)
	VMOVUPS Z14, 896(R11)
	VMOVUPS Z15, 960(R11)
	VZEROUPPER
	RET

final:
	MOVQ out+48(FP), AX
	DOT4X8REDUCE
	VZEROUPPER
	RET

// func dotF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32)
TEXT ·dotF16x4x8AVX512(SB), NOSPLIT, $0-48
	DOT4X8(PAIRF16, 16)
	VZEROUPPER
	RET

// func dotBF16x4x8AVX512(x *float32, xstride int, w *uint16, wstride, n int, out *[32]float32)
TEXT ·dotBF16x4x8AVX512(SB), NOSPLIT, $0-48
	DOT4X8(PAIRBF16, 16)
	VZEROUPPER
	RET

// Q8_0 with VNNI. VPDPBUSD multiplies unsigned by signed bytes, so the
// activations enter shifted, x+128 (x XOR 0x80), and each block's sums start
// from −128·Σw over the lane's four weights: the int32 lane sums are exactly
// those of the AVX2 kernel's VPMADDUBSW/VPMADDWD. Z30 holds 0x80 bytes, Z31
// zero.

// Q4_0 with VNNI, on pairQ4 activations (see quant_amd64.s): the nibbles are
// the unsigned operand as they are, the activations the signed one, and the
// int32 lanes start from the pair's corrections, so they are those of
// ROWQ4. Z31 holds 0x0f bytes.

// WQ4W decodes a pair of weight rows (a, b) for one pair of blocks into
// lo and hi ([a | b] nibbles, each [A | B]) and dw ([dA ×4 | dB ×4] of a,
// then of b). Arguments are the rows' addresses of the quants of A (2),
// of B (20) and of the scales of A (0) and B (18). Clobbers Z22..Z26.
#define WQ4W(a2, a20, b2, b20, a0, a18, b0, b18, lo, hi, dw) \
	VMOVDQU8     a2, X22                \
	VINSERTI32X4 $1, a20, Y22, Y22      \
	VMOVDQU8     b2, X23                \
	VINSERTI32X4 $1, b20, Y23, Y23      \
	VINSERTI32X8 $1, Y23, Z22, Z22      \
	VPSRLW       $4, Z22, hi            \
	VPANDD       Z31, Z22, lo           \
	VPANDD       Z31, hi, hi            \
	VPBROADCASTW a0, X24                \
	VPBROADCASTW a18, X25               \
	VPUNPCKLQDQ  X25, X24, X24          \
	VPBROADCASTW b0, X25                \
	VPBROADCASTW b18, X26               \
	VPUNPCKLQDQ  X26, X25, X25          \
	VINSERTI32X4 $1, X25, Y24, Y24      \
	VCVTPH2PS    Y24, dw

// WQ8ROW8(acc0, acc1): one activation row's share of a block: the row at R8
// (quants) and R10 (scale) against weight pairs Z16 (rows 0, 1) and Z17
// (rows 2, 3) with corrections Z18, Z19 and scales Z20, Z21; moves R8 and
// R10 to the next row.
#define WQ8ROW8(acc0, acc1) \
	VBROADCASTI32X8 (R8), Z22      \
	VPXORD          Z30, Z22, Z22  \
	VMOVDQA32       Z18, Z23       \
	VPDPBUSD        Z16, Z22, Z23  \
	VMOVDQA32       Z19, Z25       \
	VPDPBUSD        Z17, Z22, Z25  \
	VCVTDQ2PS       Z23, Z23       \
	VCVTDQ2PS       Z25, Z25       \
	VMULPS.BCST     (R10), Z20, Z24 \
	VMULPS.BCST     (R10), Z21, Z26 \
	VFMADD231PS     Z23, Z24, acc0 \
	VFMADD231PS     Z25, Z26, acc1 \
	ADDQ            BX, R8         \
	ADDQ            R9, R10

// WTREE8(off): TREE8 of Y0..Y7 stored at off(AX).
#define WTREE8(off) \
	TREE8 \
	VMOVUPS Y0, off(AX)

// X8OUT stores the sums of the 8-row kernels: pair (0, 1) in Z0..Z7, pair
// (2, 3) in Z8..Z15 (low halves rows 0 and 2, high halves rows 1 and 3), one
// activation row a register; out[8j+i] at AX. Each half reduces with TREE8.
#define X8OUT \
	HIGH8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7) \
	WTREE8(0) \
	MOVE8(Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23) \
	WTREE8(32) \
	HIGH8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	MOVE8(Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15) \
	WTREE8(64) \
	MOVE8(Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23) \
	WTREE8(96)

// func dotQ8_0x8x4VNNI(w *byte, rb int, xq *int8, xd *float32, nb, qstride, dstride, rows int, out *[32]float32)
//
// out[8j+i] = x row i · w row j for rows (4 or 8) activation rows (quants
// qstride bytes apart, scales dstride bytes apart) and four Q8_0 weight rows
// (rb bytes apart), nb > 0 blocks; per (i, j) the sums of dotQ8_0x4AVX2.
// With 4 rows, out[8j+4..8j+7] are zeros.
TEXT ·dotQ8_0x8x4VNNI(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), R11
	MOVQ xq+16(FP), SI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	MOVQ qstride+40(FP), BX
	MOVQ dstride+48(FP), R9
	MOVQ out+64(FP), AX
	LEAQ (DI)(R11*2), R12
	ADDQ R11, R12        // w row 3
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ZERO8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	VPXORD Z31, Z31, Z31
	MOVL   $0x80808080, R13
	VPBROADCASTD R13, Z30
	MOVQ   rows+56(FP), R13

loop:
	PREFETCH4((DI), (DI)(R11*1), (DI)(R11*2), (R12))
	VMOVDQU8     2(DI), Y16
	VINSERTI32X8 $1, 2(DI)(R11*1), Z16, Z16
	VMOVDQU8     2(DI)(R11*2), Y17
	VINSERTI32X8 $1, 2(R12), Z17, Z17
	VPXORD   Z18, Z18, Z18
	VPDPBUSD Z16, Z30, Z18
	VPSUBD   Z18, Z31, Z18
	VPXORD   Z19, Z19, Z19
	VPDPBUSD Z17, Z30, Z19
	VPSUBD   Z19, Z31, Z19
	VPBROADCASTW (DI), X20
	VPBROADCASTW (DI)(R11*1), X24
	VINSERTI32X4 $1, X24, Y20, Y20
	VCVTPH2PS    Y20, Z20
	VPBROADCASTW (DI)(R11*2), X21
	VPBROADCASTW (R12), X24
	VINSERTI32X4 $1, X24, Y21, Y21
	VCVTPH2PS    Y21, Z21
	MOVQ SI, R8
	MOVQ DX, R10
	WQ8ROW8(Z0, Z8)
	WQ8ROW8(Z1, Z9)
	WQ8ROW8(Z2, Z10)
	WQ8ROW8(Z3, Z11)
	CMPQ R13, $8
	JLT  next
	WQ8ROW8(Z4, Z12)
	WQ8ROW8(Z5, Z13)
	WQ8ROW8(Z6, Z14)
	WQ8ROW8(Z7, Z15)

next:
	ADDQ $34, DI
	ADDQ $34, R12
	ADDQ $32, SI
	ADDQ $4, DX
	DECQ CX
	JNZ  loop

	X8OUT
	VZEROUPPER
	RET

// WQ4ROW8(acc0, acc1): one activation row's pairQ4 (at R8) against the
// weight pairs Z16..Z18 (rows 0, 1) and Z19..Z21 (rows 2, 3); moves R8 to
// the next row.
#define WQ4ROW8(acc0, acc1) \
	VBROADCASTF32X8 64(R8), Z22   \
	VBROADCASTI32X8 0(R8), Z23    \
	VBROADCASTI32X8 32(R8), Z24   \
	VBROADCASTI32X8 96(R8), Z25   \
	VMOVDQA32       Z25, Z26      \
	VPDPBUSD        Z23, Z16, Z26 \
	VPDPBUSD        Z24, Z17, Z26 \
	VMOVDQA32       Z25, Z28      \
	VPDPBUSD        Z23, Z19, Z28 \
	VPDPBUSD        Z24, Z20, Z28 \
	VCVTDQ2PS       Z26, Z26      \
	VCVTDQ2PS       Z28, Z28      \
	VMULPS          Z22, Z18, Z27 \
	VMULPS          Z22, Z21, Z30 \
	VFMADD231PS     Z26, Z27, acc0 \
	VFMADD231PS     Z28, Z30, acc1 \
	ADDQ            BX, R8

// func dotQ4_0x8x4VNNI(w *byte, rb int, x *pairQ4, np, xstride, rows int, out *[32]float32)
//
// out[8j+i] = x row i · w row j for rows (4 or 8) pairQ4 activation rows
// (xstride bytes apart) and four Q4_0 weight rows (rb bytes apart), np > 0
// pairs of blocks; per (i, j) the sums of dotQ4_0x4AVX2. With 4 rows,
// out[8j+4..8j+7] are zeros.
TEXT ·dotQ4_0x8x4VNNI(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), R11
	MOVQ x+16(FP), SI
	MOVQ np+24(FP), CX
	MOVQ xstride+32(FP), BX
	MOVQ out+48(FP), AX
	LEAQ (DI)(R11*2), R12
	ADDQ R11, R12        // w row 3
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ZERO8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	MOVL $0x0f0f0f0f, R13
	VPBROADCASTD R13, Z31
	MOVQ rows+40(FP), R13

loop:
	PREFETCH4((DI), (DI)(R11*1), (DI)(R11*2), (R12))
	WQ4W(2(DI), 20(DI), 2(DI)(R11*1), 20(DI)(R11*1), 0(DI), 18(DI), 0(DI)(R11*1), 18(DI)(R11*1), Z16, Z17, Z18)
	WQ4W(2(DI)(R11*2), 20(DI)(R11*2), 2(R12), 20(R12), 0(DI)(R11*2), 18(DI)(R11*2), 0(R12), 18(R12), Z19, Z20, Z21)
	MOVQ SI, R8
	WQ4ROW8(Z0, Z8)
	WQ4ROW8(Z1, Z9)
	WQ4ROW8(Z2, Z10)
	WQ4ROW8(Z3, Z11)
	CMPQ R13, $8
	JLT  next
	WQ4ROW8(Z4, Z12)
	WQ4ROW8(Z5, Z13)
	WQ4ROW8(Z6, Z14)
	WQ4ROW8(Z7, Z15)

next:
	ADDQ $36, DI
	ADDQ $36, R12
	ADDQ $128, SI
	DECQ CX
	JNZ  loop

	X8OUT
	VZEROUPPER
	RET

// Q4_K, two weight rows a register: VPMADDUBSW and VPMADDWD on [row₀ | row₁]
// nibbles against the activations broadcast to both halves, with each
// half's sub-block scales, and the super-block fold of ENDK4 with each half's
// d, dmin and mins: the per-lane operations of dotQ4_Kx4AVX2. Scales and
// mins of row 0 go to 0(SP) and 16(SP), of row 1 to 32(SP) and 48(SP).

// K4X2ROW(lo, hi, acc): one activation row's share of a chunk: nibbles Z6
// (low), Z7 (high), scales Z8, Z9.
#define K4X2ROW(lo, hi, acc) \
	VBROADCASTI32X8 lo, Z2  \
	VPMADDUBSW      Z2, Z6, Z2 \
	VPMADDWD        Z8, Z2, Z2 \
	VBROADCASTI32X8 hi, Z3  \
	VPMADDUBSW      Z3, Z7, Z3 \
	VPMADDWD        Z9, Z3, Z3 \
	VPADDD          Z2, acc, acc \
	VPADDD          Z3, acc, acc

// K4X2CHUNK(woff, xoff, soff): 64 elements (two sub-blocks) of both rows
// against the four activation rows.
#define K4X2CHUNK(woff, xoff, soff) \
	VMOVDQU8        woff(DI), Y6 \
	VINSERTI32X8    $1, woff(R9), Z6, Z6 \
	VPSRLW          $4, Z6, Z7 \
	VPANDD          Z14, Z6, Z6 \
	VPANDD          Z14, Z7, Z7 \
	VPBROADCASTW    soff(SP), Y8 \
	VPBROADCASTW    soff+32(SP), Y18 \
	VINSERTI32X8    $1, Y18, Z8, Z8 \
	VPBROADCASTW    soff+2(SP), Y9 \
	VPBROADCASTW    soff+34(SP), Y19 \
	VINSERTI32X8    $1, Y19, Z9, Z9 \
	K4X2ROW(xoff(SI), xoff+32(SI), Z10) \
	K4X2ROW(xoff(SI)(BX*1), xoff+32(SI)(BX*1), Z11) \
	K4X2ROW(xoff(SI)(BX*2), xoff+32(SI)(BX*2), Z12) \
	K4X2ROW(xoff(R8), xoff+32(R8), Z13)

// K4X2END(bs, dx, iacc, facc): ENDK4 for both rows: Z7 = d, Z6 = dmin,
// X9 and X20 the mins of rows 0 and 1.
#define K4X2END(bs, dx, iacc, facc) \
	VMOVDQU          bs, Y2 \
	VEXTRACTI128     $1, Y2, X3 \
	VPHADDW          X3, X2, X2 \
	VPMADDWD         X20, X2, X3 \
	VPMADDWD         X9, X2, X2 \
	VINSERTI32X8     $1, Y3, Z2, Z2 \
	VCVTDQ2PS        Z2, Z2 \
	VCVTDQ2PS        iacc, iacc \
	VMULPS           Z7, iacc, iacc \
	VFNMADD231PS     Z2, Z6, iacc \
	VBROADCASTSS     dx, Z3 \
	VFMADD231PS      iacc, Z3, facc

// func dotQ4_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32)
//
// out[4j+i] = x row i · w row j for four blockQ8K activation rows (xstride
// bytes apart) and two Q4_K weight rows (rb bytes apart), nb > 0
// super-blocks; per (i, j) the sums of dotQ4_Kx4AVX2.
TEXT ·dotQ4_Kx4x2AVX512(SB), NOSPLIT, $64-48
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), R9
	ADDQ DI, R9          // w row 1
	MOVQ x+16(FP), SI
	MOVQ nb+24(FP), CX
	MOVQ xstride+32(FP), BX
	LEAQ (SI)(BX*2), R8
	ADDQ BX, R8          // x row 3
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	MOVL   $0x0f0f0f0f, R13
	VPBROADCASTD R13, Z14

loop:
	PREFETCHT0 PFDW(DI)
	PREFETCHT0 PFDW(R9)
	SCALESK4AT(4(DI), 8(DI), 12(DI), 0(SP), 16(SP), X2, X3)
	SCALESK4AT(4(R9), 8(R9), 12(R9), 32(SP), 48(SP), X2, X3)
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	K4X2CHUNK(16, 0, 0)
	K4X2CHUNK(48, 64, 4)
	K4X2CHUNK(80, 128, 8)
	K4X2CHUNK(112, 192, 12)
	// d and dmin of both rows: Z7 = [d₀ ×8 | d₁ ×8], Z6 = [dmin₀ | dmin₁].
	DMINK((DI), X6, Y7, Y6)
	DMINK((R9), X16, Y17, Y16)
	VINSERTF32X8  $1, Y17, Z7, Z7
	VINSERTF32X8  $1, Y16, Z6, Z6
	VMOVDQU       16(SP), X9
	VMOVDQU16     48(SP), X20
	K4X2END(256(SI), 288(SI), Z10, Z0)
	K4X2END(256(SI)(BX*1), 288(SI)(BX*1), Z11, Z1)
	K4X2END(256(SI)(BX*2), 288(SI)(BX*2), Z12, Z4)
	K4X2END(256(R8), 288(R8), Z13, Z5)
	ADDQ $144, DI
	ADDQ $144, R9
	ADDQ $320, SI
	ADDQ $320, R8
	DECQ CX
	JNZ  loop

	MOVQ out+40(FP), AX
	WPAIR(Z0, Z1, Z4, Z5, Y0, Y1, Y4, Y5, X0, X1, 0, 16)
	VZEROUPPER
	RET
