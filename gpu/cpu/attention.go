package cpu

import (
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
)

// Attention computes causal grouped-query attention over the paged cache.
//
// Work is split over (row, kv head) pairs. For each pair the sequence's
// blocks are walked in order; every K row is loaded once and scored against
// all query heads of its group (GQA), then the softmax-weighted V rows are
// accumulated the same way.
func (b *Backend) Attention(dst, q gpu.Tensor, kvc gpu.KV, layer, heads int, bt *gpu.Batch) {
	d, qt, kv := dst.(*tensor), q.(*tensor), kvc.(*kvArena)
	same("attention", d, qt)
	c := &kv.cfg
	if heads <= 0 || qt.cols%heads != 0 || len(bt.Pos) != qt.rows || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cpu: attention on %d×%d with %d heads at layer %d", qt.rows, qt.cols, heads, layer))
	}
	hd := qt.cols / heads
	if c.KVDim%hd != 0 || heads%(c.KVDim/hd) != 0 {
		panic(fmt.Sprintf("cpu: attention: %d heads of %d do not group over kv dim %d", heads, hd, c.KVDim))
	}
	kvHeads := c.KVDim / hd
	group := heads / kvHeads
	maxPos := int32(0)
	for i, p := range bt.Pos {
		maxPos = max(maxPos, p)
		s := int(bt.Seq[i])
		if s < 0 || s >= len(bt.Tables) || int(p)/c.BlockTokens >= len(bt.Tables[s]) {
			panic(fmt.Sprintf("cpu: attention: row %d (sequence %d, position %d) has no block", i, s, p))
		}
		for _, blk := range bt.Tables[s][:int(p)/c.BlockTokens+1] {
			if blk < 0 || int(blk) >= c.Blocks {
				panic(fmt.Sprintf("cpu: attention: block %d out of range [0,%d)", blk, c.Blocks))
			}
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	work := qt.rows * kvHeads
	run := func(lo, hi int) {
		scores := make([]float32, group*int(maxPos+1))
		for job := lo; job < hi; job++ {
			i, g := job/kvHeads, job%kvHeads
			attendOne(kv, layer, bt.Tables[bt.Seq[i]], bt.Pos[i], g, hd, group,
				qt.data[i*qt.cols+g*group*hd:i*qt.cols+(g+1)*group*hd],
				d.data[i*d.cols+g*group*hd:i*d.cols+(g+1)*group*hd], scale, scores)
		}
	}
	if work*int(maxPos+1)*hd < 1<<13 {
		run(0, work)
		return
	}
	b.pool.For(work, run)
}

// attendOne computes the outputs of the group query heads q (group×hd) that
// share kv head g, at position pos, over the sequence's blocks.
func attendOne(kv *kvArena, layer int, table []int32, pos int32, g, hd, group int, q, out []float32, scale float32, scores []float32) {
	c := &kv.cfg
	n := int(pos) + 1
	layerOff := layer * 2 * c.BlockTokens * c.KVDim
	vOff := c.BlockTokens * c.KVDim
	kd := c.KVDim
	// Scores: one K row at a time against every head of the group.
	for p0 := 0; p0 < n; p0 += c.BlockTokens {
		base := int(table[p0/c.BlockTokens])*kv.bf + layerOff + g*hd
		cnt := min(c.BlockTokens, n-p0)
		for t := 0; t < cnt; t++ {
			k := kv.data[base+t*kd : base+t*kd+hd]
			for h := 0; h < group; h++ {
				scores[h*n+p0+t] = dot(q[h*hd:h*hd+hd], k) * scale
			}
		}
	}
	for h := 0; h < group; h++ {
		softmaxFast(scores[h*n : h*n+n])
	}
	clear(out)
	for p0 := 0; p0 < n; p0 += c.BlockTokens {
		base := int(table[p0/c.BlockTokens])*kv.bf + layerOff + vOff + g*hd
		cnt := min(c.BlockTokens, n-p0)
		for t := 0; t < cnt; t++ {
			v := kv.data[base+t*kd : base+t*kd+hd]
			for h := 0; h < group; h++ {
				axpySmall(scores[h*n+p0+t], v, out[h*hd:h*hd+hd])
			}
		}
	}
}

// dot uses the vector kernel for long heads and an inline loop for short
// ones, where the call would cost more than the work.
func dot(a, b []float32) float32 {
	if len(a) >= 32 {
		return kernels.Dot(a, b)
	}
	return dotSmall(a, b)
}

// dotSmall is a dot product for short vectors, with four accumulators so the
// loop does not serialise on one add.
func dotSmall(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpySmall(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// softmaxFast replaces v by its softmax using expf.
func softmaxFast(v []float32) {
	mx := float32(math.Inf(-1))
	for _, x := range v {
		mx = max(mx, x)
	}
	var sum float32
	for i, x := range v {
		e := expf(x - mx)
		v[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range v {
		v[i] *= inv
	}
}

// expf returns e**x for x <= 0 in float32 with a relative error of about
// 2e-7: x = k·ln2 + r with |r| <= ln2/2, e**r by a degree-6 polynomial,
// and k added to the exponent bits.
func expf(x float32) float32 {
	if x < -87 {
		return 0
	}
	const ln2hi, ln2lo = 0.693145751953125, 1.428606765330187e-06
	k := float32(math.Floor(float64(x*1.442695040888963 + 0.5)))
	r := x - k*ln2hi - k*ln2lo
	p := float32(1.0 / 720)
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return math.Float32frombits(math.Float32bits(p) + uint32(int32(k))<<23)
}
