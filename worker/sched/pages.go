package sched

import "github.com/zerolayer/zerolayer/worker/model"

// pages is how sequences hold the arena: the model's layers in groups
// (model.KVLayout), one block table per group. A block ("page") holds one
// group's layers for BlockTokens positions, so the blocks of every group
// come from one pool. The global groups keep every block of a sequence; a
// windowed (sliding-window) group needs only the blocks its window reaches
// from the sequence's next position, and gives the older ones back
// (trim): a gemma3 sequence of 32k tokens holds its 3 global layers' 2,048
// blocks and, of its 15 local layers, 33 blocks each, 19% of what every
// layer at every position would take. A model without windows has one
// global group of all its layers: a block a logical block, as before.
//
// Every windowed group has the same window, so they trim together: q.lo
// is the first logical block they still hold.
type pages struct {
	groups  int    // block tables per sequence
	local   []bool // per group: windowed
	nGlobal int    // groups that keep every block
	nLocal  int    // windowed groups
	window  int    // the windowed groups' window, in positions (0: none)
	// winBlocks bounds the blocks a windowed group holds while decoding
	// (the window, and the block the next position starts); chunkBlocks
	// while a prompt chunk of up to MaxBatchTokens runs (its window
	// reaches back from its first position).
	winBlocks, chunkBlocks int
}

func newPages(l model.KVLayout, blockTokens, maxBatchTokens int) pages {
	p := pages{groups: len(l.Groups), local: make([]bool, len(l.Groups)), window: l.Window()}
	for g, w := range l.Windows {
		if w > 0 {
			p.local[g] = true
			p.nLocal++
		} else {
			p.nGlobal++
		}
	}
	if p.window > 0 {
		p.winBlocks = (p.window+blockTokens-1)/blockTokens + 1
		p.chunkBlocks = (p.window+maxBatchTokens+blockTokens-1)/blockTokens + 1
	}
	return p
}

// keepFrom is the first logical block a windowed group must hold for a
// step whose first query is at position next (0 without windows).
func (s *Scheduler) keepFrom(next int) int {
	if s.pg.window == 0 {
		return 0
	}
	return max(0, next+1-s.pg.window) / s.bt
}

// pagesAt bounds the blocks a sequence of t tokens holds: every logical
// block in the global groups, and in the windowed ones as many as a
// decode step (prefill false) or a prompt chunk (prefill true) reaches.
// Without windows it is the number of logical blocks.
func (s *Scheduler) pagesAt(t int, prefill bool) int {
	L := s.blocksFor(t)
	w := s.pg.winBlocks
	if prefill {
		w = s.pg.chunkBlocks
	}
	return s.pg.nGlobal*L + s.pg.nLocal*min(L, w)
}

// needPages is the blocks a sequence holds while a step computes its
// positions from..to-1: its exact need, where pagesAt bounds it.
func (s *Scheduler) needPages(from, to int) int {
	L := s.blocksFor(to)
	return s.pg.nGlobal*L + s.pg.nLocal*max(0, L-s.keepFrom(from))
}

// hitPages is the blocks a sequence takes with its first hits logical
// blocks from the prefix cache (its next position is then hits×bt).
func (s *Scheduler) hitPages(hits int) int {
	return s.pg.nGlobal*hits + s.pg.nLocal*max(0, hits-s.keepFrom(hits*s.bt))
}

// tokensIn is the most tokens whose pagesAt(·, false) fits in n blocks
// (a job's max_memory_mb as a context length).
func (s *Scheduler) tokensIn(n int) int {
	lo, hi := 0, s.m.Context+s.bt
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.pagesAt(mid, false) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// logical is the number of logical blocks q's tables cover.
func (q *seq) logical() int {
	if len(q.tables) == 0 {
		return 0
	}
	return len(q.tables[0])
}

// sharedHeld is the blocks q holds that it took from the prefix cache.
func (s *Scheduler) sharedHeld(q *seq) int {
	return s.pg.nGlobal*q.shared + s.pg.nLocal*max(0, q.shared-q.lo)
}

// eachPage calls f with every block q holds, group by group in position
// order.
func (q *seq) eachPage(f func(b int32)) {
	for _, t := range q.tables {
		for _, b := range t {
			if b >= 0 {
				f(b)
			}
		}
	}
}

// trim gives back the blocks of q's windowed groups that its next step's
// window no longer reaches.
func (s *Scheduler) trim(q *seq) {
	keep := min(s.keepFrom(q.computed), q.logical())
	if keep <= q.lo {
		return
	}
	for g, t := range q.tables {
		if !s.pg.local[g] {
			continue
		}
		for i := q.lo; i < keep; i++ {
			if t[i] >= 0 {
				s.bm.release(t[i])
				t[i] = -1
				q.held--
			}
		}
	}
	q.lo = keep
}

// cacheKey is the prefix-cache key of group g's block whose chain hash is
// h: h itself for group 0 (a model without windows keys as before), a
// mix of the two otherwise, never 0.
func cacheKey(h uint64, g int) uint64 {
	if g == 0 {
		return h
	}
	k := (h ^ uint64(g)*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	k ^= k >> 31
	if k == 0 {
		return 1
	}
	return k
}
