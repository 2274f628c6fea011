// emu.h: just enough of the CUDA device environment to compile the
// kernels as host C++ and run them on a CPU (build tag cudaemu, see
// ../emu.cc). Every CUDA thread of a block is a fiber; __syncthreads and
// __shfl_xor_sync are the only points where fibers switch, so kernels that
// rely on anything else (implicit warp synchrony, atomics) are caught by
// failing here.
#pragma once

#include <math.h>
#include <stddef.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
// Shared memory: one copy per emulating OS thread; blocks run one after the
// other, so every fiber of the running block sees the same copy.
#define __shared__ static thread_local

struct uint2 {
	unsigned x, y;
};
struct uint3 {
	unsigned x, y, z;
};
struct uint4 {
	unsigned x, y, z, w;
};
struct float2 {
	float x, y;
};
struct float4 {
	float x, y, z, w;
};
typedef uint3 dim3;

static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }

struct zl_fiber;
extern thread_local zl_fiber* zl_cur;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
const uint3& zl_thread_idx(zl_fiber*);
#define threadIdx (zl_thread_idx(zl_cur))

void zl_syncthreads();
// zl_warp_exchange publishes v (8 bytes) as this lane's value, waits for the
// whole warp, and returns lane src's value.
unsigned long long zl_warp_exchange(unsigned long long v, int src);
int zl_lane();

static inline void __syncthreads() { zl_syncthreads(); }

template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int laneMask) {
	(void)mask;
	unsigned long long s = 0;
	memcpy(&s, &v, sizeof(T));
	unsigned long long r = zl_warp_exchange(s, zl_lane() ^ laneMask);
	T out;
	memcpy(&out, &r, sizeof(T));
	return out;
}

static inline float __uint_as_float(unsigned u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static inline unsigned __float_as_uint(float f) {
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}
// Without -ffast-math and without FMA in the baseline x86-64 target, host
// float arithmetic is already rounded per operation.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
