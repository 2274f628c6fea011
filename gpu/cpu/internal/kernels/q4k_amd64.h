// SCALESK4AT unpacks the 6-bit scales and mins of a Q4_K super-block (its
// bytes 4, 8 and 12 at b4, b8, b12) into eight int16 scales at s0 and eight
// int16 mins at s16. Clobbers AX, DX, R11, R12, R13 and the XMM registers
// t0 and t1 (two of X0..X15: the stores are VEX-encoded).
#define SCALESK4AT(b4, b8, b12, s0, s16, t0, t1) \
	MOVL      b4, AX            \
	MOVL      b8, R11           \
	MOVL      b12, DX           \
	MOVL      AX, R12              \
	ANDL      $0x3f3f3f3f, R12     \
	MOVL      DX, R13              \
	ANDL      $0x0f0f0f0f, R13     \
	SHRL      $6, AX               \
	ANDL      $0x03030303, AX      \
	SHLL      $4, AX               \
	ORL       AX, R13              \
	SHLQ      $32, R13             \
	ORQ       R13, R12             \
	VMOVQ     R12, t0              \
	VPMOVZXBW t0, t0               \
	VMOVDQU   t0, s0            \
	MOVL      R11, R12             \
	ANDL      $0x3f3f3f3f, R12     \
	SHRL      $4, DX               \
	ANDL      $0x0f0f0f0f, DX      \
	SHRL      $6, R11              \
	ANDL      $0x03030303, R11     \
	SHLL      $4, R11              \
	ORL       R11, DX              \
	SHLQ      $32, DX              \
	ORQ       DX, R12              \
	VMOVQ     R12, t1              \
	VPMOVZXBW t1, t1               \
	VMOVDQU   t1, s16

// DMINK(addr, x, d, dmin) loads the f16 d and dmin of a Q4_K or Q5_K
// super-block at addr and broadcasts them as float32 into d and dmin; x is
// clobbered.
#define DMINK(addr, x, d, dmin) \
	VMOVD        addr, x     \
	VCVTPH2PS    x, x        \
	VBROADCASTSS x, d        \
	VPSHUFD      $0x55, x, x \
	VBROADCASTSS x, dmin
