// Package kernels is the hot path of the CPU backend: matrix
// multiplication of float32 activations by weight matrices stored in the
// GGML formats, parallelized on a pool of persistent worker goroutines.
//
// # Structure
//
// MatMul.Run computes dst = x·Wᵀ. For each shape (type, rows, cols, batch
// size bucket) it picks a plan once and caches it: the work is cut into
// tasks of a few weight rows × a block of activation rows, small enough for
// dynamic load balancing and for the activation block to stay in L2 while
// the weight rows stream past. Inside a task each weight row is multiplied
// by four activation rows at a time (the x4 kernels, which decode the
// weights once for all four; Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and Q5_K have no
// four-row kernel yet and run the single-row one four times) and by the
// remaining rows one at a time.
//
// Quantized weights multiply activations quantized once per call to 8 bits,
// as in ggml: Q8_0 blocks of 32 for Q8_0 weights, the same quantization
// laid out in block pairs (pairQ4) for Q4_0, Q8_0 blocks too for Q4_1,
// Q5_0 and Q5_1 (the kernels sum the activations of a block for the min
// and offset terms), and 256-element super-blocks with per-16 sums
// (blockQ8K) for the K-quants, so the inner loops are
// integer dot products (VPMADDUBSW/VPMADDWD) with one float multiply-add
// per block. F16 and BF16 weights convert to float32 in registers.
//
// At M = 1 (decode) there are no x4 groups: each activation row goes to a
// kernel that walks a run of weight rows itself (DotRows for F32, eight
// rows at a time reduced in one tree; the Rows kernels for F16, BF16, Q8_0
// and Q4_0), so there is no call per weight row. Float weights at larger M
// use 4×3 register tiles (four activation rows by three weight rows).
//
// Every path sums a given dot product in the same order: one accumulator
// per (activation row, weight row), blocks in order, and the same lane
// reduction tree. A row's result therefore does not depend on the batch
// size or on the rows beside it (TestMatMulBatchInvariant).
//
// The package also holds the pieces of attention over the paged KV cache
// (AttnScores, AttnValues, Max, ExpShift; attn.go, rows.go), the SwiGLU
// activation and the activation quantizers, with the same asm/Go-twin
// arrangement.
//
// # Wide kernels
//
// Where the CPU has AVX-512 (F, BW, DQ, VL), and for Q8_0 and Q4_0
// AVX512-VNNI, groups of four or eight activation rows go through tile
// kernels of 2 to 8 weight rows instead (wide_amd64.s: F32, F16, BF16,
// Q8_0, Q4_0, Q4_K, Q6_K; attention scores and values too). They give every dot
// product the bits of the AVX2 kernels: a ZMM register holds two of the
// AVX2 kernel's 8-lane
// accumulators, one per weight row of a pair (or, in attention, per head),
// and each half sees the AVX2 kernel's operations in its order; VPDPBUSD's
// unsigned operand is made exact with per-block corrections. So they mix
// freely with the other kernels, and batch invariance is unchanged
// (TestWideKernelsMatchAVX2 and TestWideAttnMatchesAVX2 compare bits).
// SetWide turns them off, to measure the difference.
//
// # Kernels
//
// Every kernel has an AVX2+FMA+F16C assembly version (float_amd64.s,
// quant_amd64.s, attn_amd64.s, quantize_amd64.s) and a pure Go twin
// (kernels_generic.go, act.go) that defines its result; the assembly is
// used when golang.org/x/sys/cpu reports the features, and the twins run
// everywhere else (or with the purego build tag). Tests compare the two on
// random data and require identical results where the arithmetic is exact
// (the integer parts, and the activation quantizers bit for bit).
//
// It imports gpu (types) and gpu/quant (block formats), nothing above the
// backend.
package kernels
