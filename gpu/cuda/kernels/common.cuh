// Shared definitions of the zerolayer CUDA kernels.
//
// The kernels are plain CUDA C++ compiled to PTX (compute_80) by `make
// kernels`. The same sources also compile on the host, with emu.h standing in
// for the CUDA runtime, so that the cudaemu build tag can run them on a CPU
// (see ../emu.cc). They therefore use only what emu.h provides: no CUDA
// headers, no atomics, no dynamic shared memory, and warp-level exchange
// only through the full-mask __shfl_xor_sync.
//
// Kernel parameters are passed by the Go side as 8-byte slots: pointers,
// int (low 4 bytes), float (the low 4 bytes hold its bits) and double.
#pragma once

#ifdef ZL_EMU
#include "emu.h"
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define ZL_FULL 0xffffffffu

// Weight storage types; the values are the GGML type ids of gpu.DType.
enum {
	T_F32 = 0,
	T_F16 = 1,
	T_Q4_0 = 2,
	T_Q8_0 = 8,
	T_Q4_K = 12,
	T_Q6_K = 14,
	T_BF16 = 30,
};

// h2f converts an IEEE binary16 value to float, exactly.
__device__ __forceinline__ float h2f(u16 h) {
#if defined(__CUDA_ARCH__)
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
#else
	u32 sign = (u32)(h & 0x8000u) << 16;
	u32 exp = (h >> 10) & 0x1fu;
	u32 mant = h & 0x3ffu;
	if (exp == 0) {
		float f = (float)mant * (1.0f / 16777216.0f);
		return sign ? -f : f;
	}
	if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
	return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

// bf2f converts a bfloat16 value to float.
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float((u32)h << 16); }

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(ZL_FULL, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(ZL_FULL, v, o));
	return v;
}

// block_sum returns the sum of v over the block (blockDim.x a multiple of
// 32, at most 1024) to every thread. red is __shared__ scratch of 32 floats;
// it may be reused right after the call returns.
__device__ __forceinline__ float block_sum(float v, float* red) {
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum(v);
	__syncthreads(); // red may still be read by a previous call
	if (lane == 0) red[warp] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : 0.0f;
	return warp_sum(v);
}

// block_max is block_sum with max; -INFINITY is the identity.
__device__ __forceinline__ float block_max(float v, float* red) {
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) red[warp] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : -INFINITY;
	return warp_max(v);
}

// Mat is a weight matrix in the device layout written by pack.go: rows of
// Kp elements (K rounded up to 8 for F32, F16 and BF16), quantized types
// with their values in natural element order and their scales in arrays of
// their own:
//
//	F32, F16, BF16: a0 = values [N][Kp]
//	Q8_0: a0 = int8 [N][K],          a1 = f16 d [N][K/32]
//	Q4_0: a0 = nibbles [N][K/2],     a1 = f16 d [N][K/32]      (value q-8)
//	Q4_K: a0 = nibbles [N][K/2],     a1 = u16 sc|m<<8 [N][K/32],
//	      a2 = u32 d|dmin<<16 [N][K/256]                        (value d·sc·q − dmin·m)
//	Q6_K: a0 = low nibbles [N][K/2], a1 = high 2 bits [N][K/4],
//	      a2 = int8 scales [N][K/16], a3 = f16 d [N][K/256]     (value d·sc·(q−32))
//
// Byte i of a nibble array holds element 2i in its low and 2i+1 in its high
// nibble; byte i of a 2-bit array holds elements 4i..4i+3, lowest first.
struct Mat {
	const u8* a0;
	const u8* a1;
	const u8* a2;
	const u8* a3;
	int N, K, Kp;
};

// deq returns element e of row n, with ggml's rounding (bit-identical to the
// CPU backend's dequantization).
__device__ __forceinline__ float deq(int t, const Mat& w, int n, int e) {
	switch (t) {
	case T_F32:
		return ((const float*)w.a0)[(size_t)n * w.Kp + e];
	case T_F16:
		return h2f(((const u16*)w.a0)[(size_t)n * w.Kp + e]);
	case T_BF16:
		return bf2f(((const u16*)w.a0)[(size_t)n * w.Kp + e]);
	case T_Q8_0: {
		float d = h2f(((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32]);
		return __fmul_rn((float)(signed char)w.a0[(size_t)n * w.K + e], d);
	}
	case T_Q4_0: {
		float d = h2f(((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32]);
		u8 b = w.a0[(size_t)n * (w.K / 2) + e / 2];
		int q = (e & 1) ? (b >> 4) : (b & 15);
		return __fmul_rn((float)(q - 8), d);
	}
	case T_Q4_K: {
		u32 dd = ((const u32*)w.a2)[(size_t)n * (w.K / 256) + e / 256];
		u16 sm = ((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32];
		float d1 = __fmul_rn(h2f((u16)(dd & 0xffff)), (float)(sm & 0xff));
		float m1 = __fmul_rn(h2f((u16)(dd >> 16)), (float)(sm >> 8));
		u8 b = w.a0[(size_t)n * (w.K / 2) + e / 2];
		int q = (e & 1) ? (b >> 4) : (b & 15);
		return __fsub_rn(__fmul_rn(d1, (float)q), m1);
	}
	case T_Q6_K: {
		float d = h2f(((const u16*)w.a3)[(size_t)n * (w.K / 256) + e / 256]);
		float ds = __fmul_rn(d, (float)(signed char)w.a2[(size_t)n * (w.K / 16) + e / 16]);
		u8 lo = w.a0[(size_t)n * (w.K / 2) + e / 2];
		u8 hi = w.a1[(size_t)n * (w.K / 4) + e / 4];
		int q = ((e & 1) ? (lo >> 4) : (lo & 15)) | (((hi >> (2 * (e & 3))) & 3) << 4);
		return __fmul_rn(ds, (float)(q - 32));
	}
	}
	return 0.0f;
}
