// Package cpu is the CPU implementation of gpu.Backend: float32 activations,
// weights in every supported storage type read in place from the mapped
// model file (F32 matrices are copied into panels at load, and Q8_0, Q4_0,
// Q4_K and Q6_K ones also kept packed, where the assembly runs), a paged
// KV arena in one float32 slice, and operations split
// across a fixed pool of worker goroutines.
//
// Matrix multiplication, the hot path, lives in internal/kernels: the
// activations are quantized once per call for quantized weights, dot
// products run in amd64 assembly (AVX2/FMA) with pure-Go twins elsewhere,
// and the kernel (matrix-vector or blocked matrix-matrix) is chosen per shape
// and cached.
//
//	be := cpu.New(cpu.Config{Threads: 2})
//	defer be.Close()
//
// It imports gpu and its own kernels (internal/kernels), nothing above the
// seam.
package cpu
