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

// KMAX4(o) takes the absolute values of the 4 vectors at o(SI) into the
// running maxima Y4..Y7. Clobbers Y8.
#define KMAX4(o) \
	VANDPS o(SI), Y15, Y8    \
	VMAXPS Y8, Y4, Y4        \
	VANDPS o+32(SI), Y15, Y8 \
	VMAXPS Y8, Y5, Y5        \
	VANDPS o+64(SI), Y15, Y8 \
	VMAXPS Y8, Y6, Y6        \
	VANDPS o+96(SI), Y15, Y8 \
	VMAXPS Y8, Y7, Y7

// K16(j) quantizes values 16j…16j+15 of the super-block at SI (id in Y6,
// ±127 in Y11/Y10) into the blockQ8K at DI: 16 int8 at 16j, their sum at
// 256+2j. Clobbers Y0, Y1, Y7, Y8, Y9, AX.
#define K16(j) \
	VMOVUPS      64*j(SI), Y0    \
	VMOVUPS      64*j+32(SI), Y1 \
	QROUND(Y0)                   \
	QROUND(Y1)                   \
	VPMINSD      Y11, Y0, Y0     \
	VPMAXSD      Y10, Y0, Y0     \
	VPMINSD      Y11, Y1, Y1     \
	VPMAXSD      Y10, Y1, Y1     \
	VPADDD       Y1, Y0, Y8      \
	VEXTRACTI128 $1, Y8, X9      \
	VPADDD       X9, X8, X8      \
	VPSHUFD      $0x4e, X8, X9   \
	VPADDD       X9, X8, X8      \
	VPSHUFD      $0xb1, X8, X9   \
	VPADDD       X9, X8, X8      \
	VMOVD        X8, AX          \
	MOVW         AX, 256+2*j(DI) \
	VPACKSSDW    Y1, Y0, Y0      \
	VPERMQ       $0xd8, Y0, Y0   \
	VEXTRACTI128 $1, Y0, X1      \
	VPACKSSWB    X1, X0, X0      \
	VMOVDQU      X0, 16*j(DI)

// func quantizeQ8KAVX2(x *float32, nb int, blocks *blockQ8K)
//
// quantizeQ8K's arithmetic: per super-block of 256 floats the amax, d =
// amax/127 and id = 127/amax (a block of zeros where amax is 0), q =
// sign·trunc(|v·id| + 1/2) clamped to ±127, and the sums of 16.
TEXT ·quantizeQ8KAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ blocks+16(FP), DI
	QCONST
	VPBROADCASTD qk<>+0(SB), Y11
	VPBROADCASTD qk<>+4(SB), Y10

kblock:
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	KMAX4(0)
	KMAX4(128)
	KMAX4(256)
	KMAX4(384)
	KMAX4(512)
	KMAX4(640)
	KMAX4(768)
	KMAX4(896)
	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0x4e, X4, X5
	VMAXPS       X5, X4, X4
	VPERMILPS    $0xb1, X4, X5
	VMAXPS       X5, X4, X4
	VXORPS       X7, X7, X7
	VUCOMISS     X7, X4
	JEQ          kzero
	VDIVSS       X12, X4, X5
	VMOVSS       X5, 288(DI)
	VDIVSS       X4, X12, X6
	VBROADCASTSS X6, Y6
	K16(0)
	K16(1)
	K16(2)
	K16(3)
	K16(4)
	K16(5)
	K16(6)
	K16(7)
	K16(8)
	K16(9)
	K16(10)
	K16(11)
	K16(12)
	K16(13)
	K16(14)
	K16(15)

knext:
	ADDQ $1024, SI
	ADDQ $320, DI
	DECQ CX
	JNZ  kblock
	VZEROUPPER
	RET

kzero:
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	VMOVDQU Y0, 128(DI)
	VMOVDQU Y0, 160(DI)
	VMOVDQU Y0, 192(DI)
	VMOVDQU Y0, 224(DI)
	VMOVDQU Y0, 256(DI)
	VMOVDQU Y0, 288(DI)
	JMP     knext

DATA qk<>+0(SB)/4, $127
DATA qk<>+4(SB)/4, $-127
GLOBL qk<>(SB), RODATA|NOPTR, $8
