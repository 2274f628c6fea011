//go:build amd64 && !purego

package kernels

import "unsafe"

// The tile kernels of attntile_amd64.s (attngen): attnQK<T>_<heads>x<blocks>
// and attnPV<T>_<heads>. Strides are in bytes.

//go:noescape
func attnQKF32_4x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_4x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_4x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_4x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF32_4(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_4(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnQKF32_2x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_2x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF32_1x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF32_2AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnQKF16_2x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x2AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_2x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnQKF16_1x1AVX2(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)

//go:noescape
func attnPVF16_2AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_4x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF32_1x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_4x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

//go:noescape
func attnPVF16_1x8AVX2(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)

type (
	qkKernel func(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32)
	pvKernel func(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int)
)

// qkKernels[wide][f16][one head][one block]: the AVX-512 kernels of 4 or 1
// heads by 4 or 1 blocks, the AVX2 ones of 2 or 1 by 2 or 1.
var qkKernels = [2][2][2][2]qkKernel{
	{ // AVX2
		{{attnQKF32_2x2AVX2, attnQKF32_2x1AVX2}, {attnQKF32_1x2AVX2, attnQKF32_1x1AVX2}},
		{{attnQKF16_2x2AVX2, attnQKF16_2x1AVX2}, {attnQKF16_1x2AVX2, attnQKF16_1x1AVX2}},
	},
	{ // AVX-512
		{{attnQKF32_4x4, attnQKF32_4x1}, {attnQKF32_1x4, attnQKF32_1x1}},
		{{attnQKF16_4x4, attnQKF16_4x1}, {attnQKF16_1x4, attnQKF16_1x1}},
	},
}

// pvKernels[columns: 64, 32, 8][f16][one head]: the AVX-512 kernels of 4
// or 1 heads, the AVX2 ones of 2 or 1 (32 columns) and 4 or 1 (8).
var pvKernels = [3][2][2]pvKernel{
	{{attnPVF32_4, attnPVF32_1}, {attnPVF16_4, attnPVF16_1}},
	{{attnPVF32_2AVX2, attnPVF32_1AVX2}, {attnPVF16_2AVX2, attnPVF16_1AVX2}},
	{{attnPVF32_4x8AVX2, attnPVF32_1x8AVX2}, {attnPVF16_4x8AVX2, attnPVF16_1x8AVX2}},
}

// qkCall calls the AVX-512 (wide) or AVX2 QK kernel of nh heads and nb
// blocks: 4 or 1 of each, or 2 or 1.
func qkCall(wide, f16 bool, nh, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32) {
	qkKernels[b2i(wide)][b2i(f16)][b2i(nh == 1)][b2i(nb == 1)](q, qstride, k, tab, bb, hd, out, ostride, scale)
}

// pvCall calls the PV kernel of cols columns: AVX-512 (64: 4 or 1 heads)
// or AVX2 (32: 2 or 1 heads; 8: 4 or 1 heads).
func pvCall(cols int, f16 bool, nh int, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int) {
	c := 0
	switch cols {
	case 32:
		c = 1
	case 8:
		c = 2
	}
	pvKernels[c][b2i(f16)][b2i(nh == 1)](p, pstride, v, vstride, cnt, out, ostride)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

//go:noescape
func toHalfAVX2(dst *uint16, src *float32, n int)

func fmaLoopAVX512(n int)

func vnniLoopAVX512(n int)

func fmaLoopAVX2(n int)

func int8LoopAVX2(n int)

//go:noescape
func blockSumsI8AVX2(qs *int8, nb int, out *int32)

//go:noescape
func attnQKQ8_4x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int)

//go:noescape
func attnQKQ8_1x4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int)

//go:noescape
func attnQKQ8_4x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int)

//go:noescape
func attnQKQ8_1x1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int)

//go:noescape
func attnPVQ8_4(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride int)

//go:noescape
func attnPVQ8_1(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride int)

// qkQ8Kernels[one head][one block]: the Q8_0 QK kernels of 4 or 1 heads
// by 4 or 1 blocks.
var qkQ8Kernels = [2][2]func(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, soff int){
	{attnQKQ8_4x4, attnQKQ8_4x1}, {attnQKQ8_1x4, attnQKQ8_1x1},
}

// attnQKQ8 is AttnQK's AVX-512 path for a Q8_0 cache (hd a multiple of
// 32): 4 heads by 4 blocks a call where there are that many.
func attnQKQ8(q []float32, nq, hd int, k *KVRows, nb int, scale float32, out []float32, ostride int) {
	base := unsafe.Pointer(&k.Q8[k.Off])
	for i := 0; i < nb; {
		step := 1
		if nb-i >= 4 {
			step = 4
		}
		h := 0
		for ; h < nq; h++ {
			nh := 1
			if nq-h >= 4 {
				nh = 4
			}
			qkQ8Kernels[b2i(nh == 1)][b2i(step == 1)](&q[h*hd], 4*hd, base, &k.Tab[i], k.BlockElems, hd, &out[h*ostride+i*k.BT], 4*ostride, scale, k.SOff)
			h += nh - 1
		}
		i += step
	}
}

// attnPVQ8 is AttnPV's AVX-512 path for a Q8_0 cache (hd a multiple of
// 64): 64 columns and 4 heads a call.
func attnPVQ8(p []float32, pstride, nq, hd int, v *KVRows, cnt int, out []float32, ostride int) {
	bt := v.BT
	for i := 0; i < (cnt+bt-1)/bt; i++ {
		rows := min(bt, cnt-i*bt)
		blk := int(v.Tab[i]) * v.BlockElems
		for c := 0; c < hd; c += 64 {
			vp := unsafe.Pointer(&v.Q8[blk+v.Off+c])
			soff := v.SOff + 2*(c/32) - c // from the columns' values to their scales
			for h := 0; h < nq; h++ {
				nh := 1
				if nq-h >= 4 {
					nh = 4
				}
				k := attnPVQ8_1
				if nh == 4 {
					k = attnPVQ8_4
				}
				k(&p[h*pstride+i*bt], 4*pstride, vp, v.Stride, rows, &out[h*ostride+c], 4*ostride, soff, v.SStride)
				h += nh - 1
			}
		}
	}
}

//go:noescape
func attnQKF32P_4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int)

//go:noescape
func attnQKF32P_1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int)

//go:noescape
func attnQKF16P_4(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int)

//go:noescape
func attnQKF16P_1(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int)

//go:noescape
func attnPVF32P(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int)

//go:noescape
func attnPVF16P(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int)

// qkPairKernels[f16][one block], pvPairKernels[f16]: the two-head kernels.
var (
	qkPairKernels = [2][2]func(q *float32, qstride int, k unsafe.Pointer, tab *int32, blockBytes, hd int, out *float32, ostride int, scale float32, kdelta int){
		{attnQKF32P_4, attnQKF32P_1}, {attnQKF16P_4, attnQKF16P_1},
	}
	pvPairKernels = [2]func(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int){attnPVF32P, attnPVF16P}
)

func qkPairCall(f16 bool, nb int, q *float32, qstride int, k unsafe.Pointer, tab *int32, bb, hd int, out *float32, ostride int, scale float32, kdelta int) {
	qkPairKernels[b2i(f16)][b2i(nb == 1)](q, qstride, k, tab, bb, hd, out, ostride, scale, kdelta)
}

func pvPairCall(f16 bool, p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, vdelta int) {
	pvPairKernels[b2i(f16)](p, pstride, v, vstride, cnt, out, ostride, vdelta)
}

//go:noescape
func attnPVQ8P(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride, vdelta, sdelta int)

func pvQ8PairCall(p *float32, pstride int, v unsafe.Pointer, vstride, cnt int, out *float32, ostride int, soff, sstride, vdelta, sdelta int) {
	attnPVQ8P(p, pstride, v, vstride, cnt, out, ostride, soff, sstride, vdelta, sdelta)
}
