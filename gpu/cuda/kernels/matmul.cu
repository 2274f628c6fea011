// Matrix multiplication out = x·wᵀ against weights dequantized on the fly.
//
// out is M×N, x is M×K (float, rows K apart), w is N×K in the layout of Mat
// (common.cuh). A block of 256 threads computes 8 output columns (one warp
// each) for MT rows of x; the grid is (ceil(M/MT), ceil(N/8)), with the row
// tiles of the same columns adjacent in launch order so that their weight
// rows are read from memory once and from L2 after.
//
// x is staged through shared memory in tiles of MT×TK floats, padded by 4
// floats every 32 so that the lanes of a warp, which each take a unit of 8
// (F32, F16, BF16) or 32 (quantized types) consecutive elements, read it
// without bank conflicts. Each lane keeps MT partial sums; the warp adds
// them up at the end. Quantized units factor the scale out of the sum, so
// the result differs from the CPU backend only by float rounding.
#include "common.cuh"

#define MM_THREADS 256
#define MM_COLS 8       // output columns (warps) per block
#define MM_TILE 8192    // MT·TK: floats of x per tile
#define MM_SMEM (MM_TILE + MM_TILE / 8) // with the padding

__device__ __forceinline__ int pad32(int e) { return e + (e >> 5) * 4; }

// dot8 adds w[0..8)·xs[0..8) for each row m (xs rows pitch floats apart).
template <int MT>
__device__ __forceinline__ void dot8(float (&acc)[MT], const float* w, const float* xs, int pitch) {
	for (int m = 0; m < MT; m++) {
		const float4* xv = (const float4*)(xs + m * pitch);
		float4 a = xv[0], b = xv[1];
		acc[m] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w +
		          w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
	}
}

// sum16 returns Σ q[j]·x[j] for 16 values and Σ x[j] in *xs_sum.
__device__ __forceinline__ float sum16(const float* q, const float* x, float* xsum) {
	const float4* xv = (const float4*)x;
	float s = 0.0f, t = 0.0f;
	for (int i = 0; i < 4; i++) {
		float4 a = xv[i];
		s += q[4 * i] * a.x + q[4 * i + 1] * a.y + q[4 * i + 2] * a.z + q[4 * i + 3] * a.w;
		t += a.x + a.y + a.z + a.w;
	}
	*xsum = t;
	return s;
}

// nib16 unpacks 8 bytes of natural-order nibbles into 16 floats.
__device__ __forceinline__ void nib16(uint2 b, float* q) {
	u32 w[2] = {b.x, b.y};
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++) {
			u32 v = (w[i] >> (8 * j)) & 0xffu;
			q[8 * i + 2 * j] = (float)(v & 15u);
			q[8 * i + 2 * j + 1] = (float)(v >> 4);
		}
}

// unit accumulates one unit of row n starting at element e (global) whose
// x values are at xs (already offset to the unit's first element of row 0).
template <int T, int MT>
__device__ __forceinline__ void unit(float (&acc)[MT], const Mat& w, int n, int e, const float* xs, int pitch) {
	if (T == T_F32) {
		const float4* p = (const float4*)(w.a0 + ((size_t)n * w.Kp + e) * 4);
		float4 a = p[0], b = p[1];
		float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
		dot8<MT>(acc, v, xs, pitch);
	} else if (T == T_F16 || T == T_BF16) {
		uint4 r = *(const uint4*)(w.a0 + ((size_t)n * w.Kp + e) * 2);
		u32 h[4] = {r.x, r.y, r.z, r.w};
		float v[8];
		for (int i = 0; i < 4; i++) {
			if (T == T_F16) {
				v[2 * i] = h2f((u16)(h[i] & 0xffff));
				v[2 * i + 1] = h2f((u16)(h[i] >> 16));
			} else {
				v[2 * i] = bf2f((u16)(h[i] & 0xffff));
				v[2 * i + 1] = bf2f((u16)(h[i] >> 16));
			}
		}
		dot8<MT>(acc, v, xs, pitch);
	} else if (T == T_Q8_0) {
		const uint4* p = (const uint4*)(w.a0 + (size_t)n * w.K + e);
		uint4 r0 = p[0], r1 = p[1];
		float d = h2f(((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32]);
		u32 b[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
		float q[32];
		for (int i = 0; i < 8; i++)
			for (int j = 0; j < 4; j++) q[4 * i + j] = (float)(signed char)((b[i] >> (8 * j)) & 0xffu);
		for (int m = 0; m < MT; m++) {
			float t, s = sum16(q, xs + m * pitch, &t) + sum16(q + 16, xs + m * pitch + 16, &t);
			acc[m] += d * s;
		}
	} else if (T == T_Q4_0 || T == T_Q4_K) {
		uint4 r = *(const uint4*)(w.a0 + (size_t)n * (w.K / 2) + e / 2);
		float q[32];
		nib16(make_uint2(r.x, r.y), q);
		nib16(make_uint2(r.z, r.w), q + 16);
		float dq, dm;
		if (T == T_Q4_0) {
			dq = h2f(((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32]);
			dm = 8.0f * dq;
		} else {
			u32 dd = ((const u32*)w.a2)[(size_t)n * (w.K / 256) + e / 256];
			u16 sm = ((const u16*)w.a1)[(size_t)n * (w.K / 32) + e / 32];
			dq = h2f((u16)(dd & 0xffff)) * (float)(sm & 0xff);
			dm = h2f((u16)(dd >> 16)) * (float)(sm >> 8);
		}
		for (int m = 0; m < MT; m++) {
			float t0, t1;
			float s = sum16(q, xs + m * pitch, &t0) + sum16(q + 16, xs + m * pitch + 16, &t1);
			acc[m] += dq * s - dm * (t0 + t1);
		}
	} else if (T == T_Q6_K) {
		uint4 lo = *(const uint4*)(w.a0 + (size_t)n * (w.K / 2) + e / 2);
		uint2 hi = *(const uint2*)(w.a1 + (size_t)n * (w.K / 4) + e / 4);
		u16 sc = *(const u16*)(w.a2 + (size_t)n * (w.K / 16) + e / 16);
		float d = h2f(((const u16*)w.a3)[(size_t)n * (w.K / 256) + e / 256]);
		float d0 = d * (float)(signed char)(sc & 0xff), d1 = d * (float)(signed char)(sc >> 8);
		float q[32];
		nib16(make_uint2(lo.x, lo.y), q);
		nib16(make_uint2(lo.z, lo.w), q + 16);
		u32 h[2] = {hi.x, hi.y};
		for (int i = 0; i < 32; i++) q[i] += (float)(((h[i / 16] >> (2 * (i % 16))) & 3u) << 4) - 32.0f;
		for (int m = 0; m < MT; m++) {
			float t;
			acc[m] += d0 * sum16(q, xs + m * pitch, &t) + d1 * sum16(q + 16, xs + m * pitch + 16, &t);
		}
	}
}

template <int T, int MT>
__device__ __forceinline__ void mm(float* out, const float* x, const u8* a0, const u8* a1, const u8* a2, const u8* a3,
                                   int M, int N, int K, int Kp) {
	const int TK = MM_TILE / MT;         // elements per tile, a multiple of 256
	const int PT = TK + TK / 8;          // padded floats per row of the tile
	const int UE = (T == T_F32 || T == T_F16 || T == T_BF16) ? 8 : 32;
	const int UNROLL = (UE == 8 || MT <= 2) ? 4 : 1;
	__shared__ float4 xs4[MM_SMEM / 4];
	float* xs = (float*)xs4;
	Mat w = {a0, a1, a2, a3, N, K, Kp};
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int m0 = blockIdx.x * MT;
	int n = blockIdx.y * MM_COLS + warp;
	float acc[MT];
	for (int m = 0; m < MT; m++) acc[m] = 0.0f;
	for (int k0 = 0; k0 < Kp; k0 += TK) {
		int tk = Kp - k0 < TK ? Kp - k0 : TK;
		__syncthreads(); // the previous tile is consumed
		for (int i = threadIdx.x; i < MT * tk; i += MM_THREADS) {
			int m = i / tk, e = i - m * tk;
			float v = 0.0f;
			if (m0 + m < M && k0 + e < K) v = x[(size_t)(m0 + m) * K + k0 + e];
			xs[m * PT + pad32(e)] = v;
		}
		__syncthreads();
		if (n < N) {
			int units = tk / UE;
			// Unrolled so that each lane has several weight loads in flight
			// (decoding is bound by memory latency otherwise), except where
			// four quantized units of 8 rows would not fit in registers.
#pragma unroll(UNROLL)
			for (int u = lane; u < units; u += 32) unit<T, MT>(acc, w, n, k0 + u * UE, xs + pad32(u * UE), PT);
		}
	}
	for (int m = 0; m < MT; m++) acc[m] = warp_sum(acc[m]);
	if (lane == 0 && n < N)
		for (int m = 0; m < MT && m0 + m < M; m++) out[(size_t)(m0 + m) * N + n] = acc[m];
}

#define MM_KERNEL(name, T, MT)                                                                               \
	extern "C" __global__ void __launch_bounds__(MM_THREADS) name(float* out, const float* x, const u8* a0, \
	                                                             const u8* a1, const u8* a2, const u8* a3,  \
	                                                             int M, int N, int K, int Kp) {             \
		mm<T, MT>(out, x, a0, a1, a2, a3, M, N, K, Kp);                                                      \
	}

#define MM_TYPE(t, T)            \
	MM_KERNEL(mm_##t##_1, T, 1) \
	MM_KERNEL(mm_##t##_2, T, 2) \
	MM_KERNEL(mm_##t##_4, T, 4) \
	MM_KERNEL(mm_##t##_8, T, 8)

MM_TYPE(f32, T_F32)
MM_TYPE(f16, T_F16)
MM_TYPE(bf16, T_BF16)
MM_TYPE(q8_0, T_Q8_0)
MM_TYPE(q4_0, T_Q4_0)
MM_TYPE(q4_k, T_Q4_K)
MM_TYPE(q6_k, T_Q6_K)
