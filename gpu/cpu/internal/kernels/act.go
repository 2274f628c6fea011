package kernels

import "math"

// Activations for the quantized kernels. x rows are quantized once per
// MatMul call.
//
// Q8_0 weights pair with 8-bit blocks of 32: the quants of a row are
// contiguous (qs) and the float32 scale of block b is d[b].
//
// Q4_0 weights pair with the same quantization laid out for the kernel
// (pairQ4): the nibbles of two consecutive weight blocks unpack into one
// register as [A low | B low] and [A high | B high], so the activations of
// block pair (A, B) are stored in that order, with the scales pre-broadcast
// and the −8 offset of the weights folded into a per-block correction.
//
// K-quant weights pair with blockQ8K: 256 quants with one float32 scale and
// the sums of each run of 16 quants, padded to 320 bytes so that the quants
// of every block start 64-byte aligned when the slice does.

const qk8 = 32 // elements per Q8_0 activation block
const qkK = 256

// blockQ8K is one 256-element activation super-block. The assembly kernels
// depend on this layout: qs at 0, bsums at 256, d at 288.
type blockQ8K struct {
	qs    [qkK]int8
	bsums [qkK / 16]int16
	d     float32
	_     [28]byte
}

// pairQ4 is the Q4_0 activation layout for blocks A = 2p and B = 2p+1 of
// a row; the assembly depends on it: lo at 0, hi at 32, d at 64, corr at 96.
type pairQ4 struct {
	lo   [32]int8   // x[A 0..15], x[B 0..15]
	hi   [32]int8   // x[A 16..31], x[B 16..31]
	d    [8]float32 // scale of A ×4, scale of B ×4
	corr [8]int32   // −8·Σ qA, 0, 0, 0, −8·Σ qB, 0, 0, 0
}

// quantizeQ4Pairs quantizes x (len a multiple of 32) into pairs
// (len ⌈blocks/2⌉); a missing last B block is zero.
func quantizeQ4Pairs(x []float32, pairs []pairQ4) {
	nb := len(x) / qk8
	if nb == 0 {
		return
	}
	_ = pairs[(nb-1)/2]
	if useAsm {
		quantizeQ4PairsAVX2(&x[0], nb, &pairs[0])
		return
	}
	quantizeQ4PairsGo(x, pairs)
}

func quantizeQ4PairsGo(x []float32, pairs []pairQ4) {
	nb := len(x) / qk8
	var q [qk8]int8
	var d [1]float32
	for b := 0; b < nb; b++ {
		quantizeQ8_0Go(x[b*qk8:(b+1)*qk8], q[:], d[:])
		p := &pairs[b/2]
		h := b % 2
		var s int32
		for j := 0; j < 16; j++ {
			p.lo[16*h+j] = q[j]
			p.hi[16*h+j] = q[16+j]
			s += int32(q[j]) + int32(q[16+j])
		}
		for j := 0; j < 4; j++ {
			p.d[4*h+j] = d[0]
			p.corr[4*h+j] = 0
		}
		p.corr[4*h] = -8 * s
	}
	if nb%2 == 1 {
		p := &pairs[nb/2]
		for j := 16; j < 32; j++ {
			p.lo[j], p.hi[j] = 0, 0
		}
		for j := 4; j < 8; j++ {
			p.d[j], p.corr[j] = 0, 0
		}
	}
}

func nearestInt(f float32) int32 {
	// Round half away from zero, like ggml's reference. |f| ≤ 127.x here.
	if f >= 0 {
		return int32(f + 0.5)
	}
	return -int32(-f + 0.5)
}

// quantizeQ8_0 quantizes x (len a multiple of 32) into qs and d.
func quantizeQ8_0(x []float32, qs []int8, d []float32) {
	nb := len(x) / qk8
	if nb == 0 {
		return
	}
	qs, d = qs[:nb*qk8], d[:nb]
	if useAsm {
		quantizeQ8_0AVX2(&x[0], nb, &qs[0], &d[0])
		return
	}
	quantizeQ8_0Go(x, qs, d)
}

func quantizeQ8_0Go(x []float32, qs []int8, d []float32) {
	nb := len(x) / qk8
	qs, d = qs[:nb*qk8], d[:nb]
	for b := 0; b < nb; b++ {
		xb := x[b*qk8 : b*qk8+qk8]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		db := amax / 127
		var id float32
		if db != 0 {
			id = 127 / amax
		}
		d[b] = db
		q := qs[b*qk8 : b*qk8+qk8]
		for j, v := range xb {
			q[j] = int8(nearestInt(v * id))
		}
	}
}

// quantizeQ8K quantizes x (len a multiple of 256) into blocks.
func quantizeQ8K(x []float32, blocks []blockQ8K) {
	nb := len(x) / qkK
	if nb == 0 {
		return
	}
	if useAsm {
		_ = blocks[nb-1]
		quantizeQ8KAVX2(&x[0], nb, &blocks[0])
		return
	}
	quantizeQ8KGo(x, blocks)
}

func quantizeQ8KGo(x []float32, blocks []blockQ8K) {
	nb := len(x) / qkK
	for b := 0; b < nb; b++ {
		xb := x[b*qkK : b*qkK+qkK]
		blk := &blocks[b]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if amax == 0 {
			*blk = blockQ8K{}
			continue
		}
		id := 127 / amax
		blk.d = amax / 127
		for j := 0; j < qkK/16; j++ {
			var s int32
			for l := 16 * j; l < 16*j+16; l++ {
				q := nearestInt(xb[l] * id)
				q = min(127, max(-127, q))
				blk.qs[l] = int8(q)
				s += q
			}
			blk.bsums[j] = int16(s)
		}
	}
}
