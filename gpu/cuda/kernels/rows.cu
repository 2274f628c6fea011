// Row-wise and element-wise kernels: embedding, gather, add, RMSNorm, RoPE,
// SwiGLU, GeGLU, scale, softmax, argmax and the logit mask. Their semantics are those of
// gpu.Backend (and of the CPU backend, the reference).
#include "common.cuh"

// embed: out row i = row ids[i] of the weight matrix, dequantized.
// grid (n), block 256.
extern "C" __global__ void embed(float* out, const int* ids, const u8* a0, const u8* a1, const u8* a2, const u8* a3,
                                 int type, int N, int K, int Kp) {
	Mat w = {a0, a1, a2, a3, N, K, Kp};
	int i = blockIdx.x, r = ids[i];
	for (int e = threadIdx.x; e < K; e += blockDim.x) out[(size_t)i * K + e] = deq(type, w, r, e);
}

// gather: dst row i = x row rows[i]. grid (n), block 256.
extern "C" __global__ void gather(float* dst, const float* x, const int* rows, int cols) {
	int i = blockIdx.x;
	const float* src = x + (size_t)rows[i] * cols;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) dst[(size_t)i * cols + e] = src[e];
}

// add: dst += x for n elements; x has one row of cols broadcast when bcast.
extern "C" __global__ void add(float* dst, const float* x, int n, int cols, int bcast) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dst[i] += x[bcast ? i % cols : i];
}

// swiglu: dst = silu(g)·u for n elements, in the overflow-free form.
extern "C" __global__ void swiglu(float* dst, const float* g, const float* u, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float x = g[i];
		float e = expf(-fabsf(x));
		float num = x < 0.0f ? x * e : x;
		dst[i] = num / (1.0f + e) * u[i];
	}
}

// geglu: dst = gelu_tanh(g)·u for n elements, the tanh approximation
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
extern "C" __global__ void geglu(float* dst, const float* g, const float* u, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float x = g[i];
		dst[i] = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))) * u[i];
	}
}

// scale: x *= s for n elements.
extern "C" __global__ void scale(float* x, float s, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}

// rmsnorm: dst row = x row / rms(x row) · w. grid (rows), block 256.
// dst may be x: each thread reads its elements before it writes them.
extern "C" __global__ void rmsnorm(float* dst, const float* x, const float* w, int cols, float eps) {
	__shared__ float red[32];
	const float* xr = x + (size_t)blockIdx.x * cols;
	float* dr = dst + (size_t)blockIdx.x * cols;
	float ss = 0.0f;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) ss += xr[e] * xr[e];
	ss = block_sum(ss, red);
	float scale = (float)(1.0 / sqrt((double)(ss / (float)cols + eps)));
	for (int e = threadIdx.x; e < cols; e += blockDim.x) dr[e] = w[e] * (scale * xr[e]);
}

// rope rotates the first 2·half dimensions of every head in place. inv holds
// each pair's angular frequency (factors applied), scale the position
// multiplier. Thread per (row, head, pair).
extern "C" __global__ void rope(float* x, const int* pos, const double* inv, int rows, int heads, int hd, int half,
                                double scale, int neox) {
	int idx = blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= rows * heads * half) return;
	int j = idx % half, h = (idx / half) % heads, r = idx / (half * heads);
	double s, c;
	sincos((double)pos[r] * scale * inv[j], &s, &c);
	float fs = (float)s, fc = (float)c;
	float* v = x + (size_t)r * heads * hd + h * hd;
	int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
	float x0 = v[a], x1 = v[b];
	v[a] = __fsub_rn(__fmul_rn(x0, fc), __fmul_rn(x1, fs));
	v[b] = __fadd_rn(__fmul_rn(x0, fs), __fmul_rn(x1, fc));
}

// softmax replaces each row by its softmax. grid (rows), block 256.
extern "C" __global__ void softmax(float* x, int cols) {
	__shared__ float red[32];
	float* r = x + (size_t)blockIdx.x * cols;
	float mx = -INFINITY;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) mx = fmaxf(mx, r[e]);
	mx = block_max(mx, red);
	float sum = 0.0f;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) {
		float v = expf(r[e] - mx);
		r[e] = v;
		sum += v;
	}
	sum = block_sum(sum, red);
	float inv = 1.0f / sum;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) r[e] *= inv;
}

// argmax writes the index of each row's largest value to out (ties: the
// lowest index; NaN is never chosen unless the row is all NaN, then 0).
// grid (rows), block 256.
extern "C" __global__ void argmax(int* out, const float* x, int cols) {
	__shared__ float rv[32];
	__shared__ int ri[32];
	const float* r = x + (size_t)blockIdx.x * cols;
	float best = -INFINITY;
	int bi = 0x7fffffff;
	for (int e = threadIdx.x; e < cols; e += blockDim.x) {
		float v = r[e];
		if (v > best || (v == best && e < bi)) best = v, bi = e;
	}
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(ZL_FULL, best, o);
		int oi = __shfl_xor_sync(ZL_FULL, bi, o);
		if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	if (lane == 0) rv[warp] = best, ri[warp] = bi;
	__syncthreads();
	if (warp == 0) {
		best = lane < nw ? rv[lane] : -INFINITY;
		bi = lane < nw ? ri[lane] : 0x7fffffff;
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(ZL_FULL, best, o);
			int oi = __shfl_xor_sync(ZL_FULL, bi, o);
			if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
		}
		if (lane == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
	}
}

// mask_logits sets x[r][e] to -INFINITY where bit e of the row's mask is
// clear. mask holds words (32 bits, bit e%32 of word e/32; the Go side's
// 64-bit bitset words read as little-endian halves) stride apart per row,
// the same row for every row when stride is 0. Thread per element.
extern "C" __global__ void mask_logits(float* x, const u32* mask, int rows, int cols, int stride) {
	int idx = blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= rows * cols) return;
	int r = idx / cols, e = idx - r * cols;
	if (!((mask[(size_t)r * stride + e / 32] >> (e % 32)) & 1u)) x[idx] = -INFINITY;
}
