//go:build amd64 && !purego

#include "textflag.h"
#include "q4k_amd64.h"

// Quantized kernels, AVX2. Weights are GGML blocks; activations are 8-bit:
// Q8_0-style (int8 quants, one float32 scale per 32) for Q8_0 and Q4_0
// weights, and blockQ8K (320 bytes: qs[256] at 0, bsums[16] int16 at 256,
// d float32 at 288) for Q4_K and Q6_K weights.
//
// Signed 8-bit products use the usual sign trick: VPMADDUBSW needs an
// unsigned operand, so it multiplies |w| by x·sign(w). Register Y15 holds
// sixteen 16-bit ones for VPMADDWD, the horizontal pair add to int32.

// Weights stream from memory once per call; prefetching PFD bytes ahead
// of the kernel's position helps the hardware prefetcher keep up. The
// single-row Q8_0 and Q4_0 kernels, which stream fastest, need a longer
// distance (measured from DRAM on Zen 3: 4 KiB and 3 KiB are 12-16% faster
// than 768 bytes).
#define PFD 768
#define PFD8ROWS 4096
#define PFD4ROWS 3072

// HSUMT: the lanes of y summed into lane 0 of x in the order of REDUCE4
// (((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7))), so that the single-row kernels
// give the four-row kernels' bits. t is clobbered.
#define HSUMT(y, x, t) \
	VHADDPS      y, y, y \
	VHADDPS      y, y, y \
	VEXTRACTF128 $1, y, t \
	VADDSS       t, x, x

#define REDUCE4(a, b, c, d, xa, xb) \
	VHADDPS      b, a, a   \
	VHADDPS      d, c, c   \
	VHADDPS      c, a, a   \
	VEXTRACTF128 $1, a, xb \
	VADDPS       xb, xa, xa \
	VMOVUPS      xa, (AX)

#define ONES16(r) \
	VPCMPEQW r, r, r \
	VPSRLW   $15, r, r

// BCAST32(val, r, x) sets every 32-bit lane of r to the immediate val,
// using DX.
#define BCAST32(val, r, x) \
	MOVL         val, DX \
	VMOVD        DX, x   \
	VPBROADCASTD x, r

// SIGNDOT(w, x, t) leaves in x the eight int32 sums of w·x over a block of
// 32 signed bytes; t is clobbered.
#define SIGNDOT(w, x, t) \
	VPSIGNB    w, w, t    \
	VPSIGNB    w, x, x    \
	VPMADDUBSW x, t, x    \
	VPMADDWD   Y15, x, x

// Q8_0 block at DI+woff against activations at SI+xoff, scale DX+doff.
#define BLOCKQ8(woff, xoff, doff, acc) \
	VPBROADCASTW woff(DI), X4     \
	VCVTPH2PS    X4, Y4           \
	VBROADCASTSS doff(DX), Y5     \
	VMULPS       Y5, Y4, Y4       \
	VMOVDQU      woff+2(DI), Y6   \
	VMOVDQU      xoff(SI), Y8     \
	SIGNDOT(Y6, Y8, Y7)           \
	VCVTDQ2PS    Y8, Y8           \
	VFMADD231PS  Y8, Y4, acc

// Q4_0 works on pairs of blocks A, B (36 bytes of weights, one pairQ4 of
// activations: lo at 0, hi at 32, pre-broadcast scales at 64, corrections
// at 96). The nibbles of A and B load into one register, [A | B]; low
// nibbles pair with lo and high nibbles with hi, multiplied unsigned (0..15)
// by signed activations. The two products add as int16 (at most 2·3810)
// before the single VPMADDWD, and the −8 offset enters through the int32
// corrections. Weight scales come from the f16 table at R11.

// PAIRQ4W decodes the pair at DI: Y6 = low nibbles, Y7 = high nibbles,
// Y4 = [dA ×4 | dB ×4]. Clobbers AX, DX, X5. Needs Y14 = 0x0f bytes.
#define PAIRQ4W \
	MOVWLZX      0(DI), AX           \
	MOVWLZX      18(DI), DX          \
	VMOVDQU      2(DI), X6           \
	VINSERTI128  $1, 20(DI), Y6, Y6  \
	VPSRLW       $4, Y6, Y7          \
	VPAND        Y14, Y6, Y6         \
	VPAND        Y14, Y7, Y7         \
	VBROADCASTSS (R11)(AX*4), X4     \
	VBROADCASTSS (R11)(DX*4), X5     \
	VINSERTF128  $1, X5, Y4, Y4

// ROWQ4(p, acc): acc += scales · (nibbles · activations) for the pairQ4 at
// address p (written as off(reg) pieces: p0 = lo, p1 = hi, p2 = d, p3 = corr).
#define ROWQ4(plo, phi, pd, pcorr, acc) \
	VPMADDUBSW plo, Y6, Y8     \
	VPMADDUBSW phi, Y7, Y9     \
	VPADDW     Y9, Y8, Y8      \
	VPMADDWD   Y15, Y8, Y8     \
	VPADDD     pcorr, Y8, Y8   \
	VCVTDQ2PS  Y8, Y8          \
	VMULPS     pd, Y4, Y9      \
	VFMADD231PS Y8, Y9, acc

// ROWQ8 adds one activation row's share of a block to acc: the weights are
// in Y6 (signed) and Y7 (|w|), the weight scale in Y4.
#define ROWQ8(xaddr, daddr, acc) \
	VMOVDQU      xaddr, Y8   \
	VPSIGNB      Y6, Y8, Y8  \
	VPMADDUBSW   Y8, Y7, Y8  \
	VPMADDWD     Y15, Y8, Y8 \
	VCVTDQ2PS    Y8, Y8      \
	VBROADCASTSS daddr, Y9   \
	VMULPS       Y9, Y4, Y9  \
	VFMADD231PS  Y8, Y9, acc

#define ROWS4Q8 \
	ROWQ8((SI), (DX), Y0)                 \
	ROWQ8((SI)(BX*1), (DX)(R9*1), Y1)     \
	ROWQ8((SI)(BX*2), (DX)(R9*2), Y2)     \
	ROWQ8((R8), (R10), Y3)

// Q4_K.
// SCALESK4: SCALESK4AT for the super-block at DI, to 0(SP) and 16(SP),
// through X2 and X3.
#define SCALESK4 SCALESK4AT(4(DI), 8(DI), 12(DI), 0(SP), 16(SP), X2, X3)

// CHUNKK4 multiplies the 64 elements of one chunk (two sub-blocks, nibbles
// at DI+woff, scales at SP+soff) by the activations at SI+xoff into the
// int32 accumulator Y10.
#define CHUNKK4(woff, xoff, soff) \
	VMOVDQU      woff(DI), Y6      \
	VPSRLW       $4, Y6, Y7        \
	VPAND        Y14, Y6, Y6       \
	VPAND        Y14, Y7, Y7       \
	VPMADDUBSW   xoff(SI), Y6, Y6  \
	VPMADDUBSW   xoff+32(SI), Y7, Y7 \
	VPBROADCASTW soff(SP), Y8      \
	VPBROADCASTW soff+2(SP), Y9    \
	VPMADDWD     Y8, Y6, Y6        \
	VPMADDWD     Y9, Y7, Y7        \
	VPADDD       Y6, Y10, Y10      \
	VPADDD       Y7, Y10, Y10

// ROWK4(lo, hi, acc): one activation row's share of a Q4_K chunk whose
// nibbles are in Y6 (low) and Y7 (high) with scales in Y8 and Y9.
#define ROWK4(lo, hi, acc) \
	VPMADDUBSW lo, Y6, Y4 \
	VPMADDWD   Y8, Y4, Y4 \
	VPMADDUBSW hi, Y7, Y5 \
	VPMADDWD   Y9, Y5, Y5 \
	VPADDD     Y4, acc, acc \
	VPADDD     Y5, acc, acc

#define CHUNKK4X4(woff, xoff, soff) \
	VMOVDQU      woff(DI), Y6      \
	VPSRLW       $4, Y6, Y7        \
	VPAND        Y14, Y6, Y6       \
	VPAND        Y14, Y7, Y7       \
	VPBROADCASTW soff(SP), Y8      \
	VPBROADCASTW soff+2(SP), Y9    \
	ROWK4(xoff(SI), xoff+32(SI), Y0)                 \
	ROWK4(xoff(SI)(BX*1), xoff+32(SI)(BX*1), Y1)     \
	ROWK4(xoff(SI)(BX*2), xoff+32(SI)(BX*2), Y2)     \
	ROWK4(xoff(R8), xoff+32(R8), Y3)

// ENDK4(bs, dx, iacc, facc): fold one row's super-block into facc:
// facc += d·dx·iacc − dmin·dx·Σ m·bsums. Y7 = d, Y6 = dmin, X9 = mins.
#define ENDK4(bs, dx, iacc, facc) \
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

// Q6_K. Quarter k of half n (32 elements, activation offset 128n+32k) is
// group g = 4n+k; its two 16-element runs use scales 2g and 2g+1. The
// quants are rebuilt as unsigned 0..63 and the −32 offset is applied once
// per super-block as 32·Σ scale·bsum.

// Q6Q1..Q6Q4 rebuild quarter 1..4 of a half into O from ql0 (L0), ql1 (L1)
// and qh (QH), through T; M0F and M30 are 0x0f and 0x30 byte masks
// (registers or memory), AND and OR the instructions (VPAND and VPOR on
// YMM, VPANDD and VPORD on ZMM). HALF6 runs the four quarters of half n.
#define Q6Q1(AND, OR, M0F, M30, L0, L1, QH, O, T) \
	AND    M0F, L0, O \
	VPSLLW $4, QH, T  \
	AND    M30, T, T  \
	OR     T, O, O

#define Q6Q2(AND, OR, M0F, M30, L0, L1, QH, O, T) \
	AND    M0F, L1, O \
	VPSLLW $2, QH, T  \
	AND    M30, T, T  \
	OR     T, O, O

#define Q6Q3(AND, OR, M0F, M30, L0, L1, QH, O, T) \
	VPSRLW $4, L0, O  \
	AND    M0F, O, O  \
	AND    M30, QH, T \
	OR     T, O, O

#define Q6Q4(AND, OR, M0F, M30, L0, L1, QH, O, T) \
	VPSRLW $4, L1, O  \
	AND    M0F, O, O  \
	VPSRLW $2, QH, T  \
	AND    M30, T, T  \
	OR     T, O, O

// The AVX2 kernels' form: ql0, ql1, qh in Y4..Y6, the quarter in Y7.
#define Q6Y(Q, M0F, M30) Q(VPAND, VPOR, M0F, M30, Y4, Y5, Y6, Y7, Y8)

// GROUP6 (single row): Y11 += scales · (q · x).
#define GROUP6(xoff, moff) \
	VPMADDUBSW xoff(SI), Y7, Y7      \
	VPSHUFB    q6shuf<>+moff(SB), X15, X9 \
	VPMOVSXBW  X9, Y9                \
	VPMADDWD   Y9, Y7, Y7            \
	VPADDD     Y7, Y11, Y11

#define HALF6(n) \
	VMOVDQU 64*n(DI), Y4        \
	VMOVDQU 64*n+32(DI), Y5     \
	VMOVDQU 128+32*n(DI), Y6    \
	Q6Y(Q6Q1, Y14, Y12)              \
	GROUP6(128*n, 64*n)         \
	Q6Y(Q6Q2, Y14, Y12)              \
	GROUP6(128*n+32, 64*n+16)   \
	Q6Y(Q6Q3, Y14, Y12)              \
	GROUP6(128*n+64, 64*n+32)   \
	Q6Y(Q6Q4, Y14, Y12)              \
	GROUP6(128*n+96, 64*n+48)

// Four-row Q6_K: int accumulators Y0..Y3, float accumulators Y11..Y14,
// masks from memory.
#define ROW6(xaddr, acc) \
	VPMADDUBSW xaddr, Y7, Y10 \
	VPMADDWD   Y9, Y10, Y10   \
	VPADDD     Y10, acc, acc

#define GROUP6X4(xoff, moff) \
	VPSHUFB   q6shuf<>+moff(SB), X15, X9 \
	VPMOVSXBW X9, Y9                     \
	ROW6(xoff(SI), Y0)                   \
	ROW6(xoff(SI)(BX*1), Y1)             \
	ROW6(xoff(SI)(BX*2), Y2)             \
	ROW6(xoff(R8), Y3)

#define HALF6X4(n) \
	VMOVDQU 64*n(DI), Y4                    \
	VMOVDQU 64*n+32(DI), Y5                 \
	VMOVDQU 128+32*n(DI), Y6                \
	Q6Y(Q6Q1, mask0f<>(SB), mask30<>(SB))        \
	GROUP6X4(128*n, 64*n)                   \
	Q6Y(Q6Q2, mask0f<>(SB), mask30<>(SB))        \
	GROUP6X4(128*n+32, 64*n+16)             \
	Q6Y(Q6Q3, mask0f<>(SB), mask30<>(SB))        \
	GROUP6X4(128*n+64, 64*n+32)             \
	Q6Y(Q6Q4, mask0f<>(SB), mask30<>(SB))        \
	GROUP6X4(128*n+96, 64*n+48)

// END6(bs, dx, iacc, facc): iacc −= 32·Σ scale·bsum; facc += d·dx·iacc.
// Y9 = int16 scales, Y8 = d.
#define END6(bs, dx, iacc, facc) \
	VPMADDWD     bs, Y9, Y10     \
	VPSLLD       $5, Y10, Y10    \
	VPSUBD       Y10, iacc, iacc \
	VCVTDQ2PS    iacc, iacc      \
	VBROADCASTSS dx, Y10         \
	VMULPS       Y8, Y10, Y10    \
	VFMADD231PS  iacc, Y10, facc

// func dotQ8_0RowsAVX2(w *byte, rb, n int, xq *int8, xd *float32, nb int, out *float32)
//
// out[r] = the dot product of the nb blocks of weight row r (at w + r·rb)
// with the activations, for r < n. One accumulator and the REDUCE4 order,
// as in dotQ8_0x4AVX2, so both give a row the same bits.
TEXT ·dotQ8_0RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R12
	MOVQ rb+8(FP), R13
	MOVQ n+16(FP), R8
	MOVQ out+48(FP), AX
	ONES16(Y15)

row:
	MOVQ   R12, DI
	MOVQ   xq+24(FP), SI
	MOVQ   xd+32(FP), DX
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0
	CMPQ   CX, $2
	JLT    one

loop2:
	PREFETCHT0 PFD8ROWS(DI)
	BLOCKQ8(0, 0, 0, Y0)
	BLOCKQ8(34, 32, 4, Y0)
	ADDQ $68, DI
	ADDQ $64, SI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  loop2

one:
	TESTQ CX, CX
	JZ    done
	BLOCKQ8(0, 0, 0, Y0)

done:
	HSUMT(Y0, X0, X1)
	VMOVSS X0, (AX)
	ADDQ   $4, AX
	ADDQ   R13, R12
	DECQ   R8
	JNZ    row
	VZEROUPPER
	RET

// func dotQ4_0RowsAVX2(w *byte, rb, n int, x *pairQ4, np int, tab *float32, out *float32)
//
// out[r] = the dot product of the 2·np blocks of weight row r (at
// w + r·rb) with the activations, for r < n; summed as in dotQ4_0x4AVX2.
TEXT ·dotQ4_0RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R12
	MOVQ rb+8(FP), R13
	MOVQ n+16(FP), R8
	MOVQ tab+40(FP), R11
	MOVQ out+48(FP), R9
	BCAST32($0x0f0f0f0f, Y14, X14)
	ONES16(Y15)

row:
	MOVQ   R12, DI
	MOVQ   x+24(FP), SI
	MOVQ   np+32(FP), CX
	VXORPS Y0, Y0, Y0
	CMPQ   CX, $2
	JLT    one

loop2:
	PREFETCHT0 PFD4ROWS(DI)
	PAIRQ4W
	ROWQ4(0(SI), 32(SI), 64(SI), 96(SI), Y0)
	ADDQ       $36, DI
	PAIRQ4W
	ROWQ4(128(SI), 160(SI), 192(SI), 224(SI), Y0)
	ADDQ       $36, DI
	ADDQ       $256, SI
	SUBQ       $2, CX
	CMPQ       CX, $2
	JGE        loop2

one:
	TESTQ CX, CX
	JZ    done
	PAIRQ4W
	ROWQ4(0(SI), 32(SI), 64(SI), 96(SI), Y0)

done:
	HSUMT(Y0, X0, X1)
	VMOVSS X0, (R9)
	ADDQ   $4, R9
	ADDQ   R13, R12
	DECQ   R8
	JNZ    row
	VZEROUPPER
	RET

// func dotQ8_0x4AVX2(w *byte, xq *int8, xd *float32, nb, qstride, dstride int, out *[4]float32)
TEXT ·dotQ8_0x4AVX2(SB), NOSPLIT, $0-56
	MOVQ   w+0(FP), DI
	MOVQ   xq+8(FP), SI
	MOVQ   xd+16(FP), DX
	MOVQ   nb+24(FP), CX
	MOVQ   qstride+32(FP), BX
	MOVQ   dstride+40(FP), R9
	MOVQ   out+48(FP), AX
	LEAQ   (SI)(BX*2), R8
	ADDQ   BX, R8
	LEAQ   (DX)(R9*2), R10
	ADDQ   R9, R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	ONES16(Y15)

loop:
	PREFETCHT0   PFD(DI)
	VPBROADCASTW (DI), X4
	VCVTPH2PS    X4, Y4
	VMOVDQU      2(DI), Y6
	VPSIGNB      Y6, Y6, Y7
	ROWS4Q8
	ADDQ         $34, DI
	ADDQ         $32, SI
	ADDQ         $32, R8
	ADDQ         $4, DX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          loop
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1)
	VZEROUPPER
	RET

// func dotQ4_0x4AVX2(w *byte, x *pairQ4, np, xstride int, tab *float32, out *[4]float32)
TEXT ·dotQ4_0x4AVX2(SB), NOSPLIT, $0-48
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   np+16(FP), CX
	MOVQ   xstride+24(FP), BX
	MOVQ   tab+32(FP), R11
	BCAST32($0x0f0f0f0f, Y14, X14)
	LEAQ   (SI)(BX*2), R8
	ADDQ   BX, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	ONES16(Y15)

loop:
	PREFETCHT0 PFD(DI)
	PAIRQ4W
	ROWQ4(0(SI), 32(SI), 64(SI), 96(SI), Y0)
	ROWQ4(0(SI)(BX*1), 32(SI)(BX*1), 64(SI)(BX*1), 96(SI)(BX*1), Y1)
	ROWQ4(0(SI)(BX*2), 32(SI)(BX*2), 64(SI)(BX*2), 96(SI)(BX*2), Y2)
	ROWQ4(0(R8), 32(R8), 64(R8), 96(R8), Y3)
	ADDQ       $36, DI
	ADDQ       $128, SI
	ADDQ       $128, R8
	DECQ       CX
	JNZ        loop
	MOVQ       out+40(FP), AX
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1)
	VZEROUPPER
	RET

// func dotQ4_KAVX2(w *byte, x *blockQ8K, nb int) float32
//
// Each super-block folds in as in dotQ4_Kx4AVX2 (ENDK4), and the lanes sum
// in the REDUCE4 order, so both kernels give a row the same bits.
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $32-28
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCAST32($0x0f0f0f0f, Y14, X14)

loop:
	PREFETCHT0   PFD(DI)
	PREFETCHT0   PFD+64(DI)
	SCALESK4
	VPXOR        Y10, Y10, Y10
	CHUNKK4(16, 0, 0)
	CHUNKK4(48, 64, 4)
	CHUNKK4(80, 128, 8)
	CHUNKK4(112, 192, 12)
	DMINK((DI), X6, Y7, Y6)
	VMOVDQU      16(SP), X9
	ENDK4(256(SI), 288(SI), Y10, Y0)
	ADDQ         $144, DI
	ADDQ         $320, SI
	DECQ         CX
	JNZ          loop
	HSUMT(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ4_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)
TEXT ·dotQ4_Kx4AVX2(SB), NOSPLIT, $32-40
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
	BCAST32($0x0f0f0f0f, Y14, X14)

loop:
	PREFETCHT0 PFD(DI)
	PREFETCHT0 PFD+64(DI)
	SCALESK4
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	CHUNKK4X4(16, 0, 0)
	CHUNKK4X4(48, 64, 4)
	CHUNKK4X4(80, 128, 8)
	CHUNKK4X4(112, 192, 12)
	DMINK((DI), X6, Y7, Y6)
	VMOVDQU       16(SP), X9
	ENDK4(256(SI), 288(SI), Y0, Y10)
	ENDK4(256(SI)(BX*1), 288(SI)(BX*1), Y1, Y11)
	ENDK4(256(SI)(BX*2), 288(SI)(BX*2), Y2, Y12)
	ENDK4(256(R8), 288(R8), Y3, Y13)
	ADDQ          $144, DI
	ADDQ          $320, SI
	ADDQ          $320, R8
	DECQ          CX
	JNZ           loop
	MOVQ          out+32(FP), AX
	REDUCE4(Y10, Y11, Y12, Y13, X10, X11)
	VZEROUPPER
	RET

// func dotQ6_KAVX2(w *byte, x *blockQ8K, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCAST32($0x0f0f0f0f, Y14, X14)
	BCAST32($0x30303030, Y12, X12)

loop:
	PREFETCHT0   PFD(DI)
	PREFETCHT0   PFD+64(DI)
	PREFETCHT0   PFD+128(DI)
	PREFETCHT0   PFD+192(DI)
	VMOVDQU      192(DI), X15
	VPXOR        Y11, Y11, Y11
	HALF6(0)
	HALF6(1)
	VPMOVSXBW    X15, Y9
	VPMADDWD     256(SI), Y9, Y9
	VPSLLD       $5, Y9, Y9
	VPSUBD       Y9, Y11, Y11
	VCVTDQ2PS    Y11, Y11
	VPBROADCASTW 208(DI), X9
	VCVTPH2PS    X9, Y9
	VBROADCASTSS 288(SI), Y10
	VMULPS       Y10, Y9, Y9
	VFMADD231PS  Y11, Y9, Y0
	ADDQ         $210, DI
	ADDQ         $320, SI
	DECQ         CX
	JNZ          loop
	HSUMT(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ6_Kx4AVX2(w *byte, x *blockQ8K, nb, xstride int, out *[4]float32)
TEXT ·dotQ6_Kx4AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   nb+16(FP), CX
	MOVQ   xstride+24(FP), BX
	LEAQ   (SI)(BX*2), R8
	ADDQ   BX, R8
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14

loop:
	PREFETCHT0   PFD(DI)
	PREFETCHT0   PFD+64(DI)
	PREFETCHT0   PFD+128(DI)
	PREFETCHT0   PFD+192(DI)
	VMOVDQU      192(DI), X15
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y3, Y3, Y3
	HALF6X4(0)
	HALF6X4(1)
	VPMOVSXBW    X15, Y9
	VPBROADCASTW 208(DI), X8
	VCVTPH2PS    X8, Y8
	END6(256(SI), 288(SI), Y0, Y11)
	END6(256(SI)(BX*1), 288(SI)(BX*1), Y1, Y12)
	END6(256(SI)(BX*2), 288(SI)(BX*2), Y2, Y13)
	END6(256(R8), 288(R8), Y3, Y14)
	ADDQ         $210, DI
	ADDQ         $320, SI
	ADDQ         $320, R8
	DECQ         CX
	JNZ          loop
	MOVQ         out+32(FP), AX
	REDUCE4(Y11, Y12, Y13, Y14, X11, X12)
	VZEROUPPER
	RET

// q6shuf: for group g, 16 bytes selecting scale byte 2g eight times, then
// 2g+1 eight times.
DATA q6shuf<>+0(SB)/8, $0x0000000000000000
DATA q6shuf<>+8(SB)/8, $0x0101010101010101
DATA q6shuf<>+16(SB)/8, $0x0202020202020202
DATA q6shuf<>+24(SB)/8, $0x0303030303030303
DATA q6shuf<>+32(SB)/8, $0x0404040404040404
DATA q6shuf<>+40(SB)/8, $0x0505050505050505
DATA q6shuf<>+48(SB)/8, $0x0606060606060606
DATA q6shuf<>+56(SB)/8, $0x0707070707070707
DATA q6shuf<>+64(SB)/8, $0x0808080808080808
DATA q6shuf<>+72(SB)/8, $0x0909090909090909
DATA q6shuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA q6shuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA q6shuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA q6shuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA q6shuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA q6shuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q6shuf<>(SB), RODATA|NOPTR, $128

DATA mask0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mask0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mask0f<>(SB), RODATA|NOPTR, $32

DATA mask30<>+0(SB)/8, $0x3030303030303030
DATA mask30<>+8(SB)/8, $0x3030303030303030
DATA mask30<>+16(SB)/8, $0x3030303030303030
DATA mask30<>+24(SB)/8, $0x3030303030303030
GLOBL mask30<>(SB), RODATA|NOPTR, $32

// Q6_K with AVX-512, two weight rows a register (here for q6shuf<> and the
// masks): the steps of dotQ6_Kx4AVX2 on [row₀ | row₁], with each half's
// scales and d, so every lane sees that kernel's operations. Pairs ql0,
// ql1, qh in Z24..Z26, the rebuilt quarter in Z27, masks 0x0f and 0x30 in
// Z29, Z30; row scales in X15 (row 0) and X31 (row 1).
// The wide kernel's form: pairs in Z24..Z26, the quarter in Z27.
#define Q6Z(Q) Q(VPANDD, VPORD, Z29, Z30, Z24, Z25, Z26, Z27, Z28)

#define ROW6Z(xaddr, acc) \
	VBROADCASTI32X8 xaddr, Z10 \
	VPMADDUBSW      Z10, Z27, Z10 \
	VPMADDWD        Z9, Z10, Z10  \
	VPADDD          Z10, acc, acc

#define GROUP6Z(xoff, moff) \
	VPSHUFB      q6shuf<>+moff(SB), X15, X9  \
	VPMOVSXBW    X9, Y9                      \
	VPSHUFB      q6shuf<>+moff(SB), X31, X16 \
	VPMOVSXBW    X16, Y16                    \
	VINSERTI32X8 $1, Y16, Z9, Z9             \
	ROW6Z(xoff(SI), Z0)                      \
	ROW6Z(xoff(SI)(BX*1), Z1)                \
	ROW6Z(xoff(SI)(BX*2), Z2)                \
	ROW6Z(xoff(R8), Z3)

#define HALF6Z(n) \
	VMOVDQU8     64*n(DI), Y24                   \
	VINSERTI32X8 $1, 64*n(R9), Z24, Z24          \
	VMOVDQU8     64*n+32(DI), Y25                \
	VINSERTI32X8 $1, 64*n+32(R9), Z25, Z25       \
	VMOVDQU8     128+32*n(DI), Y26               \
	VINSERTI32X8 $1, 128+32*n(R9), Z26, Z26      \
	Q6Z(Q6Q1)                                    \
	GROUP6Z(128*n, 64*n)                         \
	Q6Z(Q6Q2)                                    \
	GROUP6Z(128*n+32, 64*n+16)                   \
	Q6Z(Q6Q3)                                    \
	GROUP6Z(128*n+64, 64*n+32)                   \
	Q6Z(Q6Q4)                                    \
	GROUP6Z(128*n+96, 64*n+48)

// END6Z: END6 with Z9 = both rows' int16 scales, Z8 = [d₀ ×8 | d₁ ×8].
#define END6Z(bs, dx, iacc, facc) \
	VBROADCASTI32X8 bs, Z10         \
	VPMADDWD        Z10, Z9, Z10    \
	VPSLLD          $5, Z10, Z10    \
	VPSUBD          Z10, iacc, iacc \
	VCVTDQ2PS       iacc, iacc      \
	VBROADCASTSS    dx, Z10         \
	VMULPS          Z8, Z10, Z10    \
	VFMADD231PS     iacc, Z10, facc

// func dotQ6_Kx4x2AVX512(w *byte, rb int, x *blockQ8K, nb, xstride int, out *[8]float32)
//
// out[4j+i] = x row i · w row j for four blockQ8K activation rows (xstride
// bytes apart) and two Q6_K weight rows (rb bytes apart), nb > 0
// super-blocks; per (i, j) the sums of dotQ6_Kx4AVX2.
TEXT ·dotQ6_Kx4x2AVX512(SB), NOSPLIT, $0-48
	MOVQ            w+0(FP), DI
	MOVQ            rb+8(FP), R9
	ADDQ            DI, R9
	MOVQ            x+16(FP), SI
	MOVQ            nb+24(FP), CX
	MOVQ            xstride+32(FP), BX
	LEAQ            (SI)(BX*2), R8
	ADDQ            BX, R8
	VPXORD          Z20, Z20, Z20
	VPXORD          Z21, Z21, Z21
	VPXORD          Z22, Z22, Z22
	VPXORD          Z23, Z23, Z23
	VBROADCASTI32X8 mask0f<>(SB), Z29
	VBROADCASTI32X8 mask30<>(SB), Z30

loop:
	PREFETCHT0   PFD(DI)
	PREFETCHT0   PFD+128(DI)
	PREFETCHT0   PFD(R9)
	PREFETCHT0   PFD+128(R9)
	VMOVDQU      192(DI), X15
	VMOVDQU8     192(R9), X31
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	VPXORD       Z3, Z3, Z3
	HALF6Z(0)
	HALF6Z(1)
	VPMOVSXBW    X15, Y9
	VPMOVSXBW    X31, Y16
	VINSERTI32X8 $1, Y16, Z9, Z9
	VPBROADCASTW 208(DI), X8
	VCVTPH2PS    X8, Y8
	VPBROADCASTW 208(R9), X16
	VCVTPH2PS    X16, Y16
	VINSERTF32X8 $1, Y16, Z8, Z8
	END6Z(256(SI), 288(SI), Z0, Z20)
	END6Z(256(SI)(BX*1), 288(SI)(BX*1), Z1, Z21)
	END6Z(256(SI)(BX*2), 288(SI)(BX*2), Z2, Z22)
	END6Z(256(R8), 288(R8), Z3, Z23)
	ADDQ         $210, DI
	ADDQ         $210, R9
	ADDQ         $320, SI
	ADDQ         $320, R8
	DECQ         CX
	JNZ          loop

	MOVQ          out+40(FP), AX
	VMOVAPS       Z20, Z4
	VMOVAPS       Z21, Z5
	VMOVAPS       Z22, Z6
	VMOVAPS       Z23, Z7
	VEXTRACTF32X8 $1, Z4, Y12
	VEXTRACTF32X8 $1, Z5, Y13
	VEXTRACTF32X8 $1, Z6, Y14
	VEXTRACTF32X8 $1, Z7, Y15
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5)
	ADDQ          $16, AX
	REDUCE4(Y12, Y13, Y14, Y15, X12, X13)
	VZEROUPPER
	RET
