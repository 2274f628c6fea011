// The paged KV cache: storing a step's K and V rows, and attention over it.
//
// The arena is an array of blocks, each laid out as
// [layer][K, V][token][kvDim] floats (gpu.KVConfig), so the K row of
// position p of a sequence whose block table is tab lives at
//
//	tab[p/bt]·blockFloats + layer·2·bt·kvDim + (p%bt)·kvDim
//
// and its V row bt·kvDim floats later. Batch metadata comes as arrays: pos
// and seq per row, tabOff per sequence (offset of its table in tabs).
#include "common.cuh"

__device__ __forceinline__ size_t kv_slot(const int* tab, int p, int bt, int blockFloats, int layerOff, int kvDim) {
	return (size_t)tab[p / bt] * blockFloats + layerOff + (size_t)(p % bt) * kvDim;
}

// store_kv writes row i of k and v into the slot of (seq[i], pos[i]).
// Thread per element of k.
extern "C" __global__ void store_kv(float* kv, const float* k, const float* v, const int* pos, const int* seq,
                                    const int* tabOff, const int* tabs, int rows, int kvDim, int bt,
                                    int blockFloats, int layerOff) {
	int idx = blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= rows * kvDim) return;
	int i = idx / kvDim, d = idx - i * kvDim;
	size_t o = kv_slot(tabs + tabOff[seq[i]], pos[i], bt, blockFloats, layerOff, kvDim) + d;
	kv[o] = k[idx];
	kv[o + (size_t)bt * kvDim] = v[idx];
}

#define ATT_THREADS 128
#define ATT_MAXHD 256

// attend computes causal grouped-query attention for row i (blockIdx.x)
// and query head h (blockIdx.y) over positions lo..pos[i] of its sequence:
// dst = softmax(q·Kᵀ·scale)·V. Positions are taken in chunks of 128, one
// per thread for the score, with a running maximum and sum (online
// softmax); the thread of dimension d accumulates the output's d. qs, p and
// red are the kernel's shared arrays (ATT_MAXHD, ATT_THREADS, 32 floats).
__device__ __forceinline__ void attend(float* dst, const float* q, const float* kv, const int* pos, const int* seq,
                                       const int* tabOff, const int* tabs, int heads, int hd, int kvHeads, int bt,
                                       int blockFloats, int layerOff, float scale, int window, float* qs, float* p,
                                       float* red) {
	int i = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
	int kvDim = kvHeads * hd;
	int g = h / (heads / kvHeads);
	int L = pos[i] + 1;
	int lo = window > 0 && L > window ? L - window : 0;
	const int* tab = tabs + tabOff[seq[i]];
	const float* qr = q + (size_t)i * heads * hd + (size_t)h * hd;
	for (int d = t; d < hd; d += ATT_THREADS) qs[d] = qr[d];
	__syncthreads();
	float M = -INFINITY, S = 0.0f, o0 = 0.0f, o1 = 0.0f;
	for (int c0 = lo; c0 < L; c0 += ATT_THREADS) {
		int n = c0 + t;
		float s = -INFINITY;
		if (n < L) {
			const float* kr = kv + kv_slot(tab, n, bt, blockFloats, layerOff, kvDim) + g * hd;
			float acc = 0.0f;
			for (int d = 0; d < hd; d++) acc += qs[d] * kr[d];
			s = acc * scale;
		}
		float newM = fmaxf(M, block_max(s, red));
		float pn = n < L ? expf(s - newM) : 0.0f;
		float corr = expf(M - newM); // 0 on the first chunk
		S = S * corr + block_sum(pn, red);
		p[t] = pn;
		__syncthreads();
		int cn = L - c0 < ATT_THREADS ? L - c0 : ATT_THREADS;
		float a0 = 0.0f, a1 = 0.0f;
		for (int j = 0; j < cn; j++) {
			const float* vr = kv + kv_slot(tab, c0 + j, bt, blockFloats, layerOff, kvDim) + (size_t)bt * kvDim + g * hd;
			float pj = p[j];
			if (t < hd) a0 += pj * vr[t];
			if (t + ATT_THREADS < hd) a1 += pj * vr[t + ATT_THREADS];
		}
		o0 = o0 * corr + a0;
		o1 = o1 * corr + a1;
		M = newM;
		__syncthreads(); // p is rewritten by the next chunk
	}
	float* dr = dst + (size_t)i * heads * hd + (size_t)h * hd;
	if (t < hd) dr[t] = o0 / S;
	if (t + ATT_THREADS < hd) dr[t + ATT_THREADS] = o1 / S;
}

// attention: attend over every position 0..pos[i]. grid (rows, heads),
// block ATT_THREADS.
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention(float* dst, const float* q, const float* kv, const int* pos, const int* seq, const int* tabOff,
          const int* tabs, int heads, int hd, int kvHeads, int bt, int blockFloats, int layerOff, float scale) {
	__shared__ float qs[ATT_MAXHD];
	__shared__ float p[ATT_THREADS];
	__shared__ float red[32];
	attend(dst, q, kv, pos, seq, tabOff, tabs, heads, hd, kvHeads, bt, blockFloats, layerOff, scale, 0, qs, p, red);
}

// attention_window: attend over the positions p0 with pos[i] − p0 < window
// (sliding-window attention; window ≤ 0: every position, as attention).
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention_window(float* dst, const float* q, const float* kv, const int* pos, const int* seq, const int* tabOff,
                 const int* tabs, int heads, int hd, int kvHeads, int bt, int blockFloats, int layerOff, float scale,
                 int window) {
	__shared__ float qs[ATT_MAXHD];
	__shared__ float p[ATT_THREADS];
	__shared__ float red[32];
	attend(dst, q, kv, pos, seq, tabOff, tabs, heads, hd, kvHeads, bt, blockFloats, layerOff, scale, window, qs, p,
	       red);
}
