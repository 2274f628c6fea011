package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu/internal/kernels"
)

// attnKeyTile is the number of key positions scored together, in tiles
// aligned to multiples of it from position 0; a multiple of every block
// size the arena allows a tile to start in (gpu.DefaultBlockTokens).
// Each row's softmax is carried from tile to tile (online softmax), so
// the tiles are the unit of its arithmetic: because they are fixed by
// absolute position, a row's result does not depend on the rows batched
// or chunked with it.
const attnKeyTile = 64

// attnQueries is the most query heads (rows × the heads sharing a kv head)
// that share one pass over a sequence's K and V tiles: each tile is read
// from memory once per this many heads and from cache for the rest.
const attnQueries = 64

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
	tile    int // key positions per tile
	scale   float32
	window  int   // 0: full causal
	chunks  []int // first row of each chunk of rows, then the row count
	need    int   // scratch floats per task
	// pair: a chunk of one row takes kv heads two at a time (the even
	// head's job does both, the odd one's nothing): with one query head
	// per kv head, a decoding row's multiply-add chains are too few to
	// hide their latency (kernels.AttnPairs).
	pair bool

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

// run computes the (chunk, kv head) pairs lo..hi-1, the last chunks (the
// longest rows of a prompt) first, so that the pool's threads end together.
func (a *attnCall) run(lo, hi int) {
	scratch := a.get()
	last := len(a.chunks) - 2
	for job := lo; job < hi; job++ {
		c, g := last-job/a.kvHeads, job%a.kvHeads
		a.attend(a.chunks[c], a.chunks[c+1], g, scratch)
	}
	a.put(scratch)
}

// Attention computes causal grouped-query attention over the paged cache.
//
// Rows are cut into chunks: rows of one sequence at consecutive positions
// (as in a prompt), as many as give attnQueries query heads per kv head,
// or a single row. Work is split over (chunk, kv head) pairs. For each pair
// the sequence's positions are walked in tiles of attnKeyTile, flash-
// attention style: a tile's K rows are scored against every query head of
// the chunk that shares the kv head (GQA), each row's scores outside its
// causal range (and window) are dropped, the rest exponentiated against the
// row's running maximum (rescaling what the row has summed so far when the
// maximum grows), and the tile's V rows weighted by them the same way. Each
// head's sum is normalised at the end. Tiles past the chunk's last position
// are never read, and a tile is read once per chunk, whatever the
// sequence's length.
func (b *Backend) Attention(dst, q gpu.Tensor, kvc gpu.KV, layer, heads int, bt *gpu.Batch) {
	b.AttentionWindow(dst, q, kvc, layer, heads, 0, bt)
}

// AttentionWindow is Attention where a row at position p attends only to
// the positions p0 with p − p0 < window (window ≤ 0: all of 0..p). The
// tiles wholly before a chunk's first window are skipped; a row skips the
// tiles before its own window, and drops the scores of the positions
// before it like those after its own position, so a row's result does not
// depend on the rows batched with it.
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
	chunk := max(1, attnQueries/group)
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
	a.tile = max(1, attnKeyTile/c.BlockTokens) * c.BlockTokens
	a.window = max(window, 0)
	a.scale = float32(1 / math.Sqrt(float64(hd)))
	nq := max(min(chunk, qt.rows)*group, 2)
	a.need = 2*nq*hd + nq*a.tile + 2*nq
	a.pair = group == 1 && kvHeads%2 == 0 && kernels.AttnPairs(c.BlockTokens, hd)
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
	hd, group, tile := a.hd, a.group, a.tile
	gw := group * hd
	R := i1 - i0
	ng := 1 // kv heads g…g+ng−1
	if R == 1 && a.pair {
		if g%2 == 1 {
			return // done with g−1
		}
		ng = 2
	}
	hr := group * ng // query heads of a row
	nq := R * hr
	first, end := int(a.bt.Pos[i0]), int(a.bt.Pos[i1-1])+1
	// The rows' query heads for kv head g, contiguous, and their outputs.
	var qv, ov []float32
	if R == 1 {
		qv = qt.data[i0*qt.cols+g*gw : i0*qt.cols+(g+ng)*gw]
		ov = d.data[i0*d.cols+g*gw : i0*d.cols+(g+ng)*gw]
	} else {
		qv, ov = scratch[:nq*hd], scratch[nq*hd:2*nq*hd]
		for r := 0; r < R; r++ {
			copy(qv[r*gw:(r+1)*gw], qt.data[(i0+r)*qt.cols+g*gw:])
		}
	}
	scratch = scratch[2*nq*hd:]
	scores := scratch[:nq*tile]
	m, l := scratch[nq*tile:nq*tile+nq], scratch[nq*tile+nq:nq*tile+2*nq]
	for h := range nq {
		m[h], l[h] = float32(math.Inf(-1)), 0
	}
	clear(ov)
	// With a window, the positions before the first row's window are
	// skipped, from the block that holds its first position: the blocks
	// before it may be given back. Every later row's window starts later.
	start := 0
	if a.window > 0 {
		start = max(0, first+1-a.window) / c.BlockTokens * c.BlockTokens
	}
	tab := a.bt.Tables[a.bt.Seq[i0]]
	for t0 := start / tile * tile; t0 < end; t0 += tile {
		lo := max(t0, start) // the tile's first position read
		n := min(t0+tile, end) - lo
		blocks := tab[lo/c.BlockTokens : (lo+n+c.BlockTokens-1)/c.BlockTokens]
		krows := kv.rows(blocks, a.layer, g, hd, false)
		// Scores of whole blocks: those of positions past n are dropped
		// below with the others outside each row's range.
		if ng == 2 {
			k1 := kv.rows(blocks, a.layer, g+1, hd, false)
			kernels.AttnQKPair(qv, hd, &krows, &k1, len(blocks), a.scale, scores, tile)
		} else {
			kernels.AttnQK(qv, nq, hd, &krows, len(blocks), a.scale, scores, tile)
		}
		for r := 0; r < R; r++ {
			p := int(a.bt.Pos[i0+r])
			from, to := lo, min(lo+n, p+1) // row r's positions in the tile
			if a.window > 0 {
				from = max(from, p+1-a.window)
			}
			for h := r * hr; h < (r+1)*hr; h++ {
				row := scores[h*tile : h*tile+n]
				if from >= to {
					clear(row)
					continue
				}
				valid := row[from-lo : to-lo]
				if mt := kernels.Max(valid); mt > m[h] {
					if l[h] != 0 {
						f := float32(math.Exp(float64(m[h] - mt)))
						kernels.Scale(ov[h*hd:(h+1)*hd], f)
						l[h] *= f
					}
					m[h] = mt
				}
				l[h] += kernels.ExpShift(valid, m[h])
				clear(row[:from-lo])
				clear(row[to-lo:])
			}
		}
		vrows := kv.rows(blocks, a.layer, g, hd, true)
		if ng == 2 {
			v1 := kv.rows(blocks, a.layer, g+1, hd, true)
			kernels.AttnPVPair(scores, tile, hd, &vrows, &v1, n, ov, hd)
		} else {
			kernels.AttnPV(scores, tile, nq, hd, &vrows, n, ov, hd)
		}
	}
	for h := 0; h < nq; h++ {
		if l[h] != 0 {
			kernels.Scale(ov[h*hd:h*hd+hd], 1/l[h])
		}
	}
	if R > 1 {
		for r := 0; r < R; r++ {
			copy(d.data[(i0+r)*d.cols+g*gw:(i0+r)*d.cols+(g+1)*gw], ov[r*gw:(r+1)*gw])
		}
	}
}
