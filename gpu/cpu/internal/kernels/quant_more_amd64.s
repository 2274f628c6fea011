//go:build amd64 && !purego

#include "textflag.h"
#include "q4k_amd64.h"

// AVX2 kernels of the further types (kernels_more.go has the Go twins).
// Weights multiply as unsigned quants (VPMADDUBSW takes them as the
// unsigned operand), and the offsets of the signed formats (−16 for Q5_0,
// −4 for Q3_K) enter through sums of the activations.

// q5c: the VPSHUFB pattern that spreads byte i/8 of a broadcast uint32 to
// byte i, the OR masks that leave 0xff exactly where bit i%8 is set, and
// 0x10 bytes.
DATA q5c<>+0(SB)/8, $0x0000000000000000
DATA q5c<>+8(SB)/8, $0x0101010101010101
DATA q5c<>+16(SB)/8, $0x0202020202020202
DATA q5c<>+24(SB)/8, $0x0303030303030303
DATA q5c<>+32(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5c<>+40(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5c<>+48(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5c<>+56(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5c<>+64(SB)/8, $0x1010101010101010
DATA q5c<>+72(SB)/8, $0x1010101010101010
DATA q5c<>+80(SB)/8, $0x1010101010101010
DATA q5c<>+88(SB)/8, $0x1010101010101010
GLOBL q5c<>(SB), RODATA|NOPTR, $96

// sc16: VPSHUFB patterns j = 0..3 that, applied to eight int16 scales
// repeated in both lanes, broadcast scale 2j to the low lane and scale
// 2j+1 to the high lane.
DATA sc16<>+0(SB)/8, $0x0100010001000100
DATA sc16<>+8(SB)/8, $0x0100010001000100
DATA sc16<>+16(SB)/8, $0x0302030203020302
DATA sc16<>+24(SB)/8, $0x0302030203020302
DATA sc16<>+32(SB)/8, $0x0504050405040504
DATA sc16<>+40(SB)/8, $0x0504050405040504
DATA sc16<>+48(SB)/8, $0x0706070607060706
DATA sc16<>+56(SB)/8, $0x0706070607060706
DATA sc16<>+64(SB)/8, $0x0908090809080908
DATA sc16<>+72(SB)/8, $0x0908090809080908
DATA sc16<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA sc16<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA sc16<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA sc16<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA sc16<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA sc16<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL sc16<>(SB), RODATA|NOPTR, $128

DATA b01<>+0(SB)/8, $0x0101010101010101
DATA b01<>+8(SB)/8, $0x0101010101010101
DATA b01<>+16(SB)/8, $0x0101010101010101
DATA b01<>+24(SB)/8, $0x0101010101010101
GLOBL b01<>(SB), RODATA|NOPTR, $32

#define BCASTB(val, r, x) \
	MOVL         val, AX \
	VMOVD        AX, x   \
	VPBROADCASTD x, r

#define HSUM(y, x, t) \
	VHADDPS      y, y, y \
	VHADDPS      y, y, y \
	VEXTRACTF128 $1, y, t \
	VADDSS       t, x, x

// NIB32(off): Y6 = the 32 nibbles of a 32-element block at off(DI), in
// element order (low nibbles, then high). Needs Y14 = 0x0f bytes.
#define NIB32(off) \
	VMOVDQU     off(DI), X6      \
	VPSRLW      $4, X6, X7       \
	VINSERTI128 $1, X7, Y6, Y6   \
	VPAND       Y14, Y6, Y6

// HIGH5(off): Y6 |= 0x10 in the bytes whose bit is set in the uint32 at
// off(DI).
#define HIGH5(off) \
	VPBROADCASTD off(DI), Y7       \
	VPSHUFB      q5c<>+0(SB), Y7, Y7 \
	VPOR         q5c<>+32(SB), Y7, Y7 \
	VPCMPEQB     Y12, Y7, Y7      \
	VPAND        q5c<>+64(SB), Y7, Y7 \
	VPOR         Y7, Y6, Y6

// DOTSUM: Y6 = eight int32 sums of u·x, Y9 = eight int32 sums of x, for
// the activations at SI. Needs Y13 = 0x01 bytes, Y15 = 0x0001 words.
#define DOTSUM \
	VMOVDQU    (SI), Y8      \
	VPMADDUBSW Y8, Y6, Y6    \
	VPMADDWD   Y15, Y6, Y6   \
	VPMADDUBSW Y8, Y13, Y9   \
	VPMADDWD   Y15, Y9, Y9

#define SETUP32 \
	MOVQ   w+0(FP), DI     \
	MOVQ   xq+8(FP), SI    \
	MOVQ   xd+16(FP), DX   \
	MOVQ   nb+24(FP), CX   \
	VXORPS Y0, Y0, Y0      \
	VXORPS Y1, Y1, Y1      \
	BCASTB($0x0f0f0f0f, Y14, X14) \
	BCASTB($0x01010101, Y13, X13) \
	BCASTB($0x00010001, Y15, X15) \
	VPCMPEQB Y12, Y12, Y12

// MINFOLD: Y0 += isum·(d·dx), Y1 += Σx·(m·dx), with d, m the halves at
// (DI).
#define MINFOLD \
	VCVTDQ2PS    Y6, Y6     \
	VCVTDQ2PS    Y9, Y9     \
	VMOVD        (DI), X4   \
	VCVTPH2PS    X4, X4     \
	VBROADCASTSS (DX), X5   \
	VMULPS       X5, X4, X4 \
	VBROADCASTSS X4, Y5     \
	VPSHUFD      $0x55, X4, X4 \
	VBROADCASTSS X4, Y4     \
	VFMADD231PS  Y6, Y5, Y0 \
	VFMADD231PS  Y9, Y4, Y1

// Q5_K: SCALESMINK4 unpacks the 6-bit scales and mins at 4(DI) (the Q4_K
// packing) as eight int16 scales at 0(SP) and eight int16 mins at 16(SP).
#define SCALESMINK4 SCALESK4AT(4(DI), 8(DI), 12(DI), 0(SP), 16(SP), X2, X3)

// CHUNKK5: one 64-element chunk (nibbles at woff(DI), the next two bits of
// each qh byte at the bottom of Y12, which then shifts by 2) against the
// activations at xoff(SI), scales at soff(SP), into Y10.
#define CHUNKK5(woff, xoff, soff) \
	VMOVDQU      woff(DI), Y6      \
	VPSRLW       $4, Y6, Y7        \
	VPAND        Y14, Y6, Y6       \
	VPAND        Y14, Y7, Y7       \
	VPAND        Y13, Y12, Y8      \
	VPSLLW       $4, Y8, Y8        \
	VPOR         Y8, Y6, Y6        \
	VPSRLW       $1, Y12, Y8       \
	VPAND        Y13, Y8, Y8       \
	VPSLLW       $4, Y8, Y8        \
	VPOR         Y8, Y7, Y7        \
	VPSRLW       $2, Y12, Y12      \
	VPMADDUBSW   xoff(SI), Y6, Y6  \
	VPMADDUBSW   xoff+32(SI), Y7, Y7 \
	VPBROADCASTW soff(SP), Y8      \
	VPBROADCASTW soff+2(SP), Y9    \
	VPMADDWD     Y8, Y6, Y6        \
	VPMADDWD     Y9, Y7, Y7        \
	VPADDD       Y6, Y10, Y10      \
	VPADDD       Y7, Y10, Y10

// Q3_K. Element 32k+l (k < 8) has the two bits k%4 of qs[32(k/4)+l] and
// bit k of hmask[l]; Q3PAIR(k, q, shift, hsh, hs, sreg, soff) multiplies
// the 32 of them, as u = bits | high<<2 (0..7), by the activations and the
// signed scales of runs 2k and 2k+1 (as in Q2PAIR) into Y10. hsh $hs moves
// bit k of each hmask byte to bit 2. Y11, Y12 = qs halves, Y13 = hmask,
// Y14 = 0x03 bytes, Y15 = 0x04 bytes.
#define Q3PAIR(k, q, shift, hsh, hs, sreg, soff) \
	VPSRLW       $shift, q, Y6    \
	VPAND        Y14, Y6, Y6      \
	hsh          $hs, Y13, Y7     \
	VPAND        Y15, Y7, Y7      \
	VPOR         Y7, Y6, Y6       \
	VPMADDUBSW   (32*k)(SI), Y6, Y6 \
	VPSHUFB      sc16<>+soff(SB), sreg, Y8 \
	VPMADDWD     Y8, Y6, Y6       \
	VPADDD       Y6, Y10, Y10

// Q2_K: Q2PAIR(k, q, shift, sreg, soff) multiplies elements 32k..32k+31
// (the two bits at shift of the qs half in q) by the activations and the
// scales of runs 2k and 2k+1 (from sreg by the sc16 pattern at soff) into
// Y10. Y14 = 0x03 bytes.
#define Q2PAIR(k, q, shift, sreg, soff) \
	VPSRLW       $shift, q, Y6    \
	VPAND        Y14, Y6, Y6      \
	VPMADDUBSW   (32*k)(SI), Y6, Y6 \
	VPSHUFB      sc16<>+soff(SB), sreg, Y8 \
	VPMADDWD     Y8, Y6, Y6       \
	VPADDD       Y6, Y10, Y10

// Four-row forms. The weights decode once; each row keeps its own integer
// accumulator (Y0..Y3) and float accumulator (Y10..Y13) and folds its
// super-blocks with the single-row kernel's instructions, and REDUCE4X
// sums the lanes in HSUM's order, so a row gets the single-row bits.
// Activation rows are at SI, SI+BX, SI+2·BX and R8 = SI+3·BX.
#define REDUCE4X(a, b, c, d, xa, xb) \
	VHADDPS      b, a, a   \
	VHADDPS      d, c, c   \
	VHADDPS      c, a, a   \
	VEXTRACTF128 $1, a, xb \
	VADDPS       xb, xa, xa \
	VMOVUPS      xa, (AX)

// ROWU(lo, hi, acc): acc += Y8-scaled lo·Y6 + Y9-scaled hi·Y7.
#define ROWU(lo, hi, acc) \
	VPMADDUBSW lo, Y6, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW hi, Y7, Y5 \
	VPMADDWD   Y9, Y5, Y5 \
	VPADDD     Y4, acc, acc \
	VPADDD     Y5, acc, acc

// CHUNKK5X4: CHUNKK5 for four rows; the qh bits roll in Y15.
#define CHUNKK5X4(woff, xoff, soff) \
	VMOVDQU      woff(DI), Y6      \
	VPSRLW       $4, Y6, Y7        \
	VPAND        Y14, Y6, Y6       \
	VPAND        Y14, Y7, Y7       \
	VPAND        b01<>(SB), Y15, Y8 \
	VPSLLW       $4, Y8, Y8        \
	VPOR         Y8, Y6, Y6        \
	VPSRLW       $1, Y15, Y8       \
	VPAND        b01<>(SB), Y8, Y8 \
	VPSLLW       $4, Y8, Y8        \
	VPOR         Y8, Y7, Y7        \
	VPSRLW       $2, Y15, Y15      \
	VPBROADCASTW soff(SP), Y8      \
	VPBROADCASTW soff+2(SP), Y9    \
	ROWU(xoff(SI), xoff+32(SI), Y0)                 \
	ROWU(xoff(SI)(BX*1), xoff+32(SI)(BX*1), Y1)     \
	ROWU(xoff(SI)(BX*2), xoff+32(SI)(BX*2), Y2)     \
	ROWU(xoff(R8), xoff+32(R8), Y3)

// ENDK5(bs, dx, iacc, facc): the single-row Q5_K fold. Y7 = d, Y6 = dmin,
// X9 = mins.
#define ENDK5(bs, dx, iacc, facc) \
	VMOVDQU      bs, Y4          \
	VEXTRACTI128 $1, Y4, X5      \
	VPHADDW      X5, X4, X4      \
	VPMADDWD     X9, X4, X4      \
	VCVTDQ2PS    Y4, Y4          \
	VCVTDQ2PS    iacc, iacc      \
	VMULPS       Y7, iacc, iacc  \
	VFNMADD231PS Y4, Y6, iacc    \
	VBROADCASTSS dx, Y5          \
	VFMADD231PS  iacc, Y5, facc

// ROW3(x, acc): acc += Y8-scaled x·Y6.
#define ROW3(x, acc) \
	VPMADDUBSW x, Y6, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPADDD     Y4, acc, acc

// Q3PAIRX4: Q3PAIR for four rows, the quants and hmask from memory and
// the scales (Y1/Y2 of the single-row kernel) from ssp(SP).
#define Q3PAIRX4(k, qoff, shift, hsh, hs, ssp, soff) \
	VMOVDQU      qoff(DI), Y6     \
	VPSRLW       $shift, Y6, Y6   \
	VPAND        Y14, Y6, Y6      \
	VMOVDQU      (DI), Y7         \
	hsh          $hs, Y7, Y7      \
	VPAND        Y15, Y7, Y7      \
	VPOR         Y7, Y6, Y6       \
	VMOVDQU      ssp(SP), Y8      \
	VPSHUFB      sc16<>+soff(SB), Y8, Y8 \
	ROW3((32*k)(SI), Y0)          \
	ROW3((32*k)(SI)(BX*1), Y1)    \
	ROW3((32*k)(SI)(BX*2), Y2)    \
	ROW3((32*k)(R8), Y3)

// END3(bs, dx, iacc, facc): the single-row Q3_K fold; X9 = d, 64(SP) =
// the int16 scales.
#define END3(bs, dx, iacc, facc) \
	VMOVDQU      64(SP), Y5       \
	VPMADDWD     bs, Y5, Y4       \
	VPSLLD       $2, Y4, Y4       \
	VPSUBD       Y4, iacc, iacc   \
	VCVTDQ2PS    iacc, iacc       \
	VMULSS       dx, X9, X4       \
	VBROADCASTSS X4, Y4           \
	VFMADD231PS  iacc, Y4, facc

// func dotQ4_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-36
	SETUP32

loop:
	NIB32(4)
	DOTSUM
	MINFOLD
	ADDQ $20, DI
	ADDQ $32, SI
	ADDQ $4, DX
	DECQ CX
	JNZ  loop
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ5_1AVX2(w *byte, xq *int8, xd *float32, nb int) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-36
	SETUP32

loop:
	NIB32(8)
	HIGH5(4)
	DOTSUM
	MINFOLD
	ADDQ $24, DI
	ADDQ $32, SI
	ADDQ $4, DX
	DECQ CX
	JNZ  loop
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ5_0AVX2(w *byte, xq *int8, xd *float32, nb int) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $0-36
	SETUP32

loop:
	NIB32(6)
	HIGH5(2)
	DOTSUM
	VPSLLD       $4, Y9, Y9
	VPSUBD       Y9, Y6, Y6
	VCVTDQ2PS    Y6, Y6
	MOVWLZX      (DI), AX
	VMOVD        AX, X4
	VCVTPH2PS    X4, X4
	VMULSS       (DX), X4, X4
	VBROADCASTSS X4, Y4
	VFMADD231PS  Y6, Y4, Y0
	ADDQ $22, DI
	ADDQ $32, SI
	ADDQ $4, DX
	DECQ CX
	JNZ  loop
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotQ5_KAVX2(w *byte, x *blockQ8K, nb int) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $32-28
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCASTB($0x0f0f0f0f, Y14, X14)
	BCASTB($0x01010101, Y13, X13)

loop:
	SCALESMINK4
	VMOVDQU      16(DI), Y12
	VPXOR        Y10, Y10, Y10
	CHUNKK5(48, 0, 0)
	CHUNKK5(80, 64, 4)
	CHUNKK5(112, 128, 8)
	CHUNKK5(144, 192, 12)
	// Y0 += d·dx·isum − dmin·dx·Σ m·bsums
	DMINK((DI), X6, Y7, Y6)
	VMOVDQU      16(SP), X9
	VMOVDQU      256(SI), Y4
	VEXTRACTI128 $1, Y4, X5
	VPHADDW      X5, X4, X4
	VPMADDWD     X9, X4, X4
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y10, Y10
	VMULPS       Y7, Y10, Y10
	VFNMADD231PS Y4, Y6, Y10
	VBROADCASTSS 288(SI), Y5
	VFMADD231PS  Y10, Y5, Y0
	ADDQ         $176, DI
	ADDQ         $320, SI
	DECQ         CX
	JNZ          loop
	HSUM(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ3_KAVX2(w *byte, x *blockQ8K, nb int) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCASTB($0x03030303, Y14, X14)
	BCASTB($0x04040404, Y15, X15)
	BCASTB($0x00200020, Y5, X5)

loop:
	// The sixteen 6-bit scales, unpacked as ggml does, minus 32: int16 in
	// Y3, scales 0-7 in both lanes of Y1, scales 8-15 in both lanes of Y2.
	MOVL    96(DI), AX
	MOVL    100(DI), BX
	MOVL    104(DI), DX
	MOVL    AX, R8
	ANDL    $0x0f0f0f0f, R8
	MOVL    DX, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R8
	MOVL    BX, R10
	ANDL    $0x0f0f0f0f, R10
	MOVL    DX, R9
	SHRL    $2, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R10
	SHLQ    $32, R10
	ORQ     R10, R8
	VMOVQ   R8, X3
	MOVL    AX, R8
	SHRL    $4, R8
	ANDL    $0x0f0f0f0f, R8
	MOVL    DX, R9
	SHRL    $4, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R8
	MOVL    BX, R10
	SHRL    $4, R10
	ANDL    $0x0f0f0f0f, R10
	MOVL    DX, R9
	SHRL    $6, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R10
	SHLQ    $32, R10
	ORQ     R10, R8
	VPINSRQ   $1, R8, X3, X3
	VPMOVZXBW X3, Y3
	VPSUBW    Y5, Y3, Y3
	VPERMQ    $0x44, Y3, Y1
	VPERMQ    $0xee, Y3, Y2

	VMOVDQU (DI), Y13
	VMOVDQU 32(DI), Y11
	VMOVDQU 64(DI), Y12
	VPXOR   Y10, Y10, Y10
	Q3PAIR(0, Y11, 0, VPSLLW, 2, Y1, 0)
	Q3PAIR(1, Y11, 2, VPSLLW, 1, Y1, 32)
	Q3PAIR(2, Y11, 4, VPSRLW, 0, Y1, 64)
	Q3PAIR(3, Y11, 6, VPSRLW, 1, Y1, 96)
	Q3PAIR(4, Y12, 0, VPSRLW, 2, Y2, 0)
	Q3PAIR(5, Y12, 2, VPSRLW, 3, Y2, 32)
	Q3PAIR(6, Y12, 4, VPSRLW, 4, Y2, 64)
	Q3PAIR(7, Y12, 6, VPSRLW, 5, Y2, 96)

	// isum −= 4·Σ scale·bsum; Y0 += d·dx·isum
	VPMADDWD     256(SI), Y3, Y4
	VPSLLD       $2, Y4, Y4
	VPSUBD       Y4, Y10, Y10
	VCVTDQ2PS    Y10, Y10
	MOVWLZX      108(DI), AX
	VMOVD        AX, X4
	VCVTPH2PS    X4, X4
	VMULSS       288(SI), X4, X4
	VBROADCASTSS X4, Y4
	VFMADD231PS  Y10, Y4, Y0
	ADDQ         $110, DI
	ADDQ         $320, SI
	DECQ         CX
	JNZ          loop
	HSUM(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ2_KAVX2(w *byte, x *blockQ8K, nb int) float32
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCASTB($0x03030303, Y14, X14)
	BCASTB($0x0f0f0f0f, Y15, X15)

loop:
	// Scales (low nibbles) as int16: 0-7 in both lanes of Y1, 8-15 in
	// both lanes of Y2; mins (high nibbles) as int16 in Y5.
	VMOVDQU   (DI), X3
	VPSRLW    $4, X3, X5
	VPAND     X15, X3, X3
	VPAND     X15, X5, X5
	VPMOVZXBW X3, Y3
	VPMOVZXBW X5, Y5
	VPERMQ    $0x44, Y3, Y1
	VPERMQ    $0xee, Y3, Y2

	VMOVDQU 16(DI), Y11
	VMOVDQU 48(DI), Y12
	VPXOR   Y10, Y10, Y10
	Q2PAIR(0, Y11, 0, Y1, 0)
	Q2PAIR(1, Y11, 2, Y1, 32)
	Q2PAIR(2, Y11, 4, Y1, 64)
	Q2PAIR(3, Y11, 6, Y1, 96)
	Q2PAIR(4, Y12, 0, Y2, 0)
	Q2PAIR(5, Y12, 2, Y2, 32)
	Q2PAIR(6, Y12, 4, Y2, 64)
	Q2PAIR(7, Y12, 6, Y2, 96)

	// Y0 += d·dx·isum − dmin·dx·Σ m·bsum
	VPMADDWD     256(SI), Y5, Y4
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y10, Y10
	VMOVD        80(DI), X6
	VCVTPH2PS    X6, X6
	VBROADCASTSS 288(SI), X5
	VMULPS       X5, X6, X6
	VBROADCASTSS X6, Y7
	VPSHUFD      $0x55, X6, X6
	VBROADCASTSS X6, Y6
	VMULPS       Y7, Y10, Y10
	VFNMADD231PS Y4, Y6, Y10
	VADDPS       Y10, Y0, Y0
	ADDQ         $84, DI
	ADDQ         $320, SI
	DECQ         CX
	JNZ          loop
	HSUM(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ5_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)
TEXT ·dotQ5_Kx4AVX2(SB), NOSPLIT, $32-40
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	MOVQ   xstride+24(FP), BX
	LEAQ   (SI)(BX*2), R8
	ADDQ   BX, R8
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	BCASTB($0x0f0f0f0f, Y14, X14)

loop:
	SCALESMINK4
	VMOVDQU 16(DI), Y15
	VPXOR   Y0, Y0, Y0
	VPXOR   Y1, Y1, Y1
	VPXOR   Y2, Y2, Y2
	VPXOR   Y3, Y3, Y3
	CHUNKK5X4(48, 0, 0)
	CHUNKK5X4(80, 64, 4)
	CHUNKK5X4(112, 128, 8)
	CHUNKK5X4(144, 192, 12)
	DMINK((DI), X6, Y7, Y6)
	VMOVDQU      16(SP), X9
	ENDK5(256(SI), 288(SI), Y0, Y10)
	ENDK5(256(SI)(BX*1), 288(SI)(BX*1), Y1, Y11)
	ENDK5(256(SI)(BX*2), 288(SI)(BX*2), Y2, Y12)
	ENDK5(256(R8), 288(R8), Y3, Y13)
	ADDQ $176, DI
	ADDQ $320, SI
	ADDQ $320, R8
	DECQ CX
	JNZ  loop
	MOVQ out+32(FP), AX
	REDUCE4X(Y10, Y11, Y12, Y13, X10, X11)
	VZEROUPPER
	RET

// func dotQ3_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)
TEXT ·dotQ3_Kx4AVX2(SB), NOSPLIT, $96-40
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	MOVQ   xstride+24(FP), BX
	LEAQ   (SI)(BX*2), R8
	ADDQ   BX, R8
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	BCASTB($0x03030303, Y14, X14)
	BCASTB($0x04040404, Y15, X15)

loop:
	// Scales as in dotQ3_KAVX2: 0-7 (both lanes) at 0(SP), 8-15 at
	// 32(SP), all sixteen at 64(SP).
	MOVL    96(DI), AX
	MOVL    100(DI), R11
	MOVL    104(DI), DX
	MOVL    AX, R12
	ANDL    $0x0f0f0f0f, R12
	MOVL    DX, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R12
	MOVL    R11, R10
	ANDL    $0x0f0f0f0f, R10
	MOVL    DX, R9
	SHRL    $2, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R10
	SHLQ    $32, R10
	ORQ     R10, R12
	VMOVQ   R12, X3
	MOVL    AX, R12
	SHRL    $4, R12
	ANDL    $0x0f0f0f0f, R12
	MOVL    DX, R9
	SHRL    $4, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R12
	MOVL    R11, R10
	SHRL    $4, R10
	ANDL    $0x0f0f0f0f, R10
	MOVL    DX, R9
	SHRL    $6, R9
	ANDL    $0x03030303, R9
	SHLL    $4, R9
	ORL     R9, R10
	SHLQ    $32, R10
	ORQ     R10, R12
	VPINSRQ   $1, R12, X3, X3
	VPMOVZXBW X3, Y3
	BCASTB($0x00200020, Y5, X5)
	VPSUBW    Y5, Y3, Y3
	VMOVDQU   Y3, 64(SP)
	VPERMQ    $0x44, Y3, Y1
	VMOVDQU   Y1, 0(SP)
	VPERMQ    $0xee, Y3, Y2
	VMOVDQU   Y2, 32(SP)

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	Q3PAIRX4(0, 32, 0, VPSLLW, 2, 0, 0)
	Q3PAIRX4(1, 32, 2, VPSLLW, 1, 0, 32)
	Q3PAIRX4(2, 32, 4, VPSRLW, 0, 0, 64)
	Q3PAIRX4(3, 32, 6, VPSRLW, 1, 0, 96)
	Q3PAIRX4(4, 64, 0, VPSRLW, 2, 32, 0)
	Q3PAIRX4(5, 64, 2, VPSRLW, 3, 32, 32)
	Q3PAIRX4(6, 64, 4, VPSRLW, 4, 32, 64)
	Q3PAIRX4(7, 64, 6, VPSRLW, 5, 32, 96)

	MOVWLZX   108(DI), AX
	VMOVD     AX, X9
	VCVTPH2PS X9, X9
	END3(256(SI), 288(SI), Y0, Y10)
	END3(256(SI)(BX*1), 288(SI)(BX*1), Y1, Y11)
	END3(256(SI)(BX*2), 288(SI)(BX*2), Y2, Y12)
	END3(256(R8), 288(R8), Y3, Y13)
	ADDQ $110, DI
	ADDQ $320, SI
	ADDQ $320, R8
	DECQ CX
	JNZ  loop
	MOVQ out+32(FP), AX
	REDUCE4X(Y10, Y11, Y12, Y13, X10, X11)
	VZEROUPPER
	RET
