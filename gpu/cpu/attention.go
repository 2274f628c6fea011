package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
)

// attnRows is the most query rows of one sequence (at consecutive
// positions, as in a prompt) that share one pass over the K and V rows;
// fewer when their scores would take more than attnScoreFloats.
const attnRows = 8

const attnScoreFloats = 32 << 10

// attnCall is the Attention call in progress, read by its tasks; the task
// function is made once so that a parallel call allocates nothing.
type attnCall struct {
	d, q    *tensor
	kv      *kvArena
	bt      *gpu.Batch
	layer   int
	hd      int
	group   int
	kvHeads int
	scale   float32
	window  int   // 0: full causal
	chunks  []int // first row of each chunk of rows, then the row count
	need    int   // scratch floats per task

	mu   sync.Mutex
	free [][]float32 // scratch buffers
	task func(lo, hi int)
}

// get returns a scratch buffer of a.need floats, reusing a free one; one
// that has become too small is dropped.
func (a *attnCall) get() []float32 {
	a.mu.Lock()
	var s []float32
	if n := len(a.free); n > 0 {
		s = a.free[n-1]
		a.free = a.free[:n-1]
	}
	a.mu.Unlock()
	if cap(s) < a.need {
		s = make([]float32, a.need, a.need+a.need/4)
	}
	return s[:a.need]
}

func (a *attnCall) put(s []float32) {
	a.mu.Lock()
	a.free = append(a.free, s)
	a.mu.Unlock()
}

// run computes the (chunk, kv head) pairs lo..hi-1.
func (a *attnCall) run(lo, hi int) {
	scratch := a.get()
	for job := lo; job < hi; job++ {
		c, g := job/a.kvHeads, job%a.kvHeads
		a.attend(a.chunks[c], a.chunks[c+1], g, scratch)
	}
	a.put(scratch)
}

// Attention computes causal grouped-query attention over the paged cache.
//
// Rows are cut into chunks: up to attnRows rows of one sequence at
// consecutive positions, or a single row. Work is split over (chunk, kv
// head) pairs. For each pair the sequence's blocks are walked in order, and
// every block's K rows are scored against each query head of the chunk's
// rows that shares the kv head (GQA); each row's scores past its own
// position are dropped, the rest exponentiated, and the V rows weighted by
// them the same way. Each head's sum is normalised at the end.
func (b *Backend) Attention(dst, q gpu.Tensor, kvc gpu.KV, layer, heads int, bt *gpu.Batch) {
	b.AttentionWindow(dst, q, kvc, layer, heads, 0, bt)
}

// AttentionWindow is Attention where a row at position p attends only to
// the positions p0 with p − p0 < window (window ≤ 0: all of 0..p). The
// scores of the positions before the window are computed with the others
// and dropped like those after the row's own position, so a row's result
// does not depend on the rows batched with it.
func (b *Backend) AttentionWindow(dst, q gpu.Tensor, kvc gpu.KV, layer, heads, window int, bt *gpu.Batch) {
	d, qt, kv := dst.(*tensor), q.(*tensor), kvc.(*kvArena)
	same("attention", d, qt)
	c := &kv.cfg
	if heads <= 0 || qt.cols%heads != 0 || len(bt.Pos) != qt.rows || len(bt.Seq) != qt.rows || layer < 0 || layer >= c.Layers {
		panic(fmt.Sprintf("cpu: attention on %d×%d with %d heads at layer %d", qt.rows, qt.cols, heads, layer))
	}
	hd := qt.cols / heads
	if hd == 0 || c.KVDim%hd != 0 || heads%(c.KVDim/hd) != 0 {
		panic(fmt.Sprintf("cpu: attention: %d heads of %d do not group over kv dim %d", heads, hd, c.KVDim))
	}
	kvHeads := c.KVDim / hd
	group := heads / kvHeads
	a := &b.att
	a.chunks = a.chunks[:0]
	maxPos := int32(0)
	for _, p := range bt.Pos {
		maxPos = max(maxPos, p)
	}
	chunk := max(1, min(attnRows, attnScoreFloats/(group*(int(maxPos)+1))))
	var total int
	for i, p := range bt.Pos {
		s := int(bt.Seq[i])
		if p < 0 || s < 0 || s >= len(bt.Tables) || int(p)/c.BlockTokens >= len(bt.Tables[s]) {
			panic(fmt.Sprintf("cpu: attention: row %d (sequence %d, position %d) has no block", i, s, p))
		}
		total += int(p) + 1
		// A windowed row reads only its window's blocks: the table may
		// hold −1 before them (memory given back, gpu.Batch).
		lo := 0
		if window > 0 {
			lo = max(0, int(p)+1-window) / c.BlockTokens
		}
		for _, blk := range bt.Tables[s][lo : int(p)/c.BlockTokens+1] {
			if blk < 0 || int(blk) >= c.Blocks {
				panic(fmt.Sprintf("cpu: attention: block %d out of range [0,%d)", blk, c.Blocks))
			}
		}
		if n := len(a.chunks); n == 0 || i-a.chunks[n-1] == chunk || bt.Seq[i-1] != bt.Seq[i] || bt.Pos[i-1]+1 != p {
			a.chunks = append(a.chunks, i)
		}
	}
	a.chunks = append(a.chunks, qt.rows)
	a.d, a.q, a.kv, a.bt = d, qt, kv, bt
	a.layer, a.hd, a.group, a.kvHeads = layer, hd, group, kvHeads
	a.window = max(window, 0)
	a.scale = float32(1 / math.Sqrt(float64(hd)))
	nq := chunk * group
	a.need = 2*nq*hd + nq*(int(maxPos)+1) + nq
	work := (len(a.chunks) - 1) * kvHeads
	// Below about 128k multiply-adds (of K and again of V) a hand-off to
	// the pool costs more than it saves.
	if b.cfg.Threads == 1 || work == 1 || total*heads*hd < 1<<17 {
		a.run(0, work)
	} else {
		b.pool.For(work, a.task)
	}
	a.d, a.q, a.kv, a.bt = nil, nil, nil, nil
}

// attend computes the outputs of rows i0..i1-1 (one sequence, consecutive
// positions) for the query heads that share kv head g.
func (a *attnCall) attend(i0, i1, g int, scratch []float32) {
	qt, d, kv := a.q, a.d, a.kv
	c := &kv.cfg
	hd, group := a.hd, a.group
	gw := group * hd
	R := i1 - i0
	nq := R * group
	n := int(a.bt.Pos[i1-1]) + 1
	// With a window, the blocks before the first row's window are skipped:
	// positions start at base, a block boundary. Skipping them changes no
	// bit: their weights would be zeros, which add nothing.
	base := 0
	if a.window > 0 {
		if first := int(a.bt.Pos[i0]) + 1 - a.window; first > 0 {
			base = first / c.BlockTokens * c.BlockTokens
		}
	}
	n -= base
	// The rows' query heads for kv head g, contiguous, and their outputs.
	var qv, ov []float32
	if R == 1 {
		qv = qt.data[i0*qt.cols+g*gw : i0*qt.cols+(g+1)*gw]
		ov = d.data[i0*d.cols+g*gw : i0*d.cols+(g+1)*gw]
	} else {
		qv, ov = scratch[:nq*hd], scratch[nq*hd:2*nq*hd]
		for r := 0; r < R; r++ {
			copy(qv[r*gw:(r+1)*gw], qt.data[(i0+r)*qt.cols+g*gw:])
		}
	}
	scratch = scratch[2*nq*hd:]
	scores, sums := scratch[:nq*n], scratch[nq*n:nq*n+nq]
	rows := kernels.Paged{
		Data:        kv.data,
		Tab:         a.bt.Tables[a.bt.Seq[i0]][base/c.BlockTokens:],
		BlockFloats: kv.bf,
		Off:         a.layer*2*c.BlockTokens*c.KVDim + g*hd,
		BT:          c.BlockTokens,
		Stride:      c.KVDim,
	}
	kernels.AttnScores(qv, nq, hd, &rows, n, a.scale, scores)
	for r := 0; r < R; r++ {
		nr := int(a.bt.Pos[i0+r]) + 1 - base // row r's positions end here
		lo := 0
		if a.window > 0 {
			lo = max(0, nr-a.window) // and its window starts here
		}
		for h := r * group; h < (r+1)*group; h++ {
			s := scores[h*n+lo : h*n+nr]
			sums[h] = kernels.ExpShift(s, kernels.Max(s))
			clear(scores[h*n : h*n+lo])     // positions before row r's window
			clear(scores[h*n+nr : (h+1)*n]) // positions after row r's
		}
	}
	clear(ov)
	rows.Off += c.BlockTokens * c.KVDim // V follows K in each layer of a block
	kernels.AttnValues(scores, nq, hd, &rows, n, ov)
	for h := 0; h < nq; h++ {
		kernels.Scale(ov[h*hd:h*hd+hd], 1/sums[h])
	}
	if R > 1 {
		for r := 0; r < R; r++ {
			copy(d.data[(i0+r)*d.cols+g*gw:(i0+r)*d.cols+(g+1)*gw], ov[r*gw:(r+1)*gw])
		}
	}
}
