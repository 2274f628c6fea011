//go:build amd64 && !purego

#include "textflag.h"

// Activation quantization, AVX2: the same arithmetic as quantizeQ8_0 and
// quantizeQ4Pairs (float32 amax/127 and 127/amax, q = sign·trunc(|v·id| +
// 1/2)), so the results are identical.
//
// Constants: Y15 the abs mask, Y14 one half, Y13 the VPERMD order that
// undoes the lane interleaving of the packs, X12 127.

#define QCONST \
	VBROADCASTSS qc<>+0(SB), Y15 \
	VBROADCASTSS qc<>+4(SB), Y14 \
	VMOVDQU      qperm<>(SB), Y13 \
	VMOVSS       qc<>+8(SB), X12

// QBLOCK quantizes the 32 floats at SI: Y0 = the int8 quants in order,
// X5 = the scale d = amax/127, R10 = the sum of the quants. The inverse
// scale 127/amax is masked to 0 where d is 0. Clobbers Y1..Y9.
#define QBLOCK \
	VMOVUPS      (SI), Y0          \
	VMOVUPS      32(SI), Y1        \
	VMOVUPS      64(SI), Y2        \
	VMOVUPS      96(SI), Y3        \
	VANDPS       Y15, Y0, Y4       \
	VANDPS       Y15, Y1, Y5       \
	VANDPS       Y15, Y2, Y6       \
	VANDPS       Y15, Y3, Y7       \
	VMAXPS       Y5, Y4, Y4        \
	VMAXPS       Y7, Y6, Y6        \
	VMAXPS       Y6, Y4, Y4        \
	VEXTRACTF128 $1, Y4, X5        \
	VMAXPS       X5, X4, X4        \
	VPERMILPS    $0x4e, X4, X5     \
	VMAXPS       X5, X4, X4        \
	VPERMILPS    $0xb1, X4, X5     \
	VMAXPS       X5, X4, X4        \
	VDIVSS       X12, X4, X5       \
	VDIVSS       X4, X12, X6       \
	VXORPS       X7, X7, X7        \
	VCMPSS       $4, X7, X5, X7    \
	VANDPS       X7, X6, X6        \
	VBROADCASTSS X6, Y6            \
	QROUND(Y0)                     \
	QROUND(Y1)                     \
	QROUND(Y2)                     \
	QROUND(Y3)                     \
	VPADDD       Y1, Y0, Y8        \
	VPADDD       Y3, Y2, Y9        \
	VPADDD       Y9, Y8, Y8        \
	VEXTRACTI128 $1, Y8, X9        \
	VPADDD       X9, X8, X8        \
	VPSHUFD      $0x4e, X8, X9     \
	VPADDD       X9, X8, X8        \
	VPSHUFD      $0xb1, X8, X9     \
	VPADDD       X9, X8, X8        \
	VMOVD        X8, R10           \
	VPACKSSDW    Y1, Y0, Y0        \
	VPACKSSDW    Y3, Y2, Y2        \
	VPACKSSWB    Y2, Y0, Y0        \
	VPERMD       Y0, Y13, Y0

// QROUND(y): y = nearestInt(y·id) as int32, id in Y6. Clobbers Y7.
#define QROUND(y) \
	VMULPS     Y6, y, y   \
	VANDPS     Y15, y, Y7 \
	VADDPS     Y14, Y7, Y7 \
	VCVTTPS2DQ Y7, Y7     \
	VPSIGND    y, Y7, y

// func quantizeQ8_0AVX2(x *float32, nb int, qs *int8, d *float32)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	QCONST

loop:
	QBLOCK
	VMOVDQU Y0, (DI)
	VMOVSS  X5, (DX)
	ADDQ    $128, SI
	ADDQ    $32, DI
	ADDQ    $4, DX
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// QHALF stores the block in Y0/X5/R10 as half h of the pairQ4 at DI (see
// pairQ4: lo at 0, hi at 32, d at 64, corr at 96).
#define QHALF(h) \
	VMOVDQU      X0, 16*h(DI)       \
	VEXTRACTI128 $1, Y0, 32+16*h(DI) \
	VBROADCASTSS X5, X5             \
	VMOVUPS      X5, 64+16*h(DI)    \
	SHLL         $3, R10            \
	NEGL         R10                \
	VMOVD        R10, X8            \
	VMOVDQU      X8, 96+16*h(DI)

// func quantizeQ4PairsAVX2(x *float32, nb int, p *pairQ4)
TEXT ·quantizeQ4PairsAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ p+16(FP), DI
	QCONST
	CMPQ CX, $2
	JLT  odd

pair:
	QBLOCK
	QHALF(0)
	ADDQ $128, SI
	QBLOCK
	QHALF(1)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  pair

odd:
	// A last block A alone: its B half is zero.
	TESTQ   CX, CX
	JZ      done
	QBLOCK
	QHALF(0)
	VPXOR   X0, X0, X0
	VMOVDQU X0, 16(DI)
	VMOVDQU X0, 48(DI)
	VMOVDQU X0, 80(DI)
	VMOVDQU X0, 112(DI)

done:
	VZEROUPPER
	RET

DATA qc<>+0(SB)/4, $0x7fffffff // abs mask
DATA qc<>+4(SB)/4, $0x3f000000 // 0.5
DATA qc<>+8(SB)/4, $0x42fe0000 // 127
GLOBL qc<>(SB), RODATA|NOPTR, $12

DATA qperm<>+0(SB)/4, $0
DATA qperm<>+4(SB)/4, $4
DATA qperm<>+8(SB)/4, $1
DATA qperm<>+12(SB)/4, $5
DATA qperm<>+16(SB)/4, $2
DATA qperm<>+20(SB)/4, $6
DATA qperm<>+24(SB)/4, $3
DATA qperm<>+28(SB)/4, $7
GLOBL qperm<>(SB), RODATA|NOPTR, $32
