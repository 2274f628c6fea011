package sched

import (
	"fmt"
	"slices"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
)

// dropSwap returns q's host slots. The tier runs its copies in order, so
// a slot may be reused as soon as the copy reading it is queued.
func (s *Scheduler) dropSwap(q *seq) {
	if q.swap != nil {
		s.host.free = append(s.host.free, q.swap...)
		s.host.used -= len(q.swap)
		q.swap = nil
	}
}

// gcSwap releases host copies kept longer than EvictionGCInterval; those
// sequences recompute when they resume.
func (s *Scheduler) gcSwap(now time.Time) {
	for _, q := range s.waiting {
		if q.swap != nil && now.Sub(q.swapAt) > s.cfg.EvictionGCInterval {
			s.dropSwap(q)
			q.computed = 0
			if m := s.cfg.Metrics; m != nil {
				m.swapGC.Inc()
			}
		}
	}
}

// score is q's eviction score: lower is evicted first.
func (s *Scheduler) score(q *seq) float64 {
	remaining := q.g.MaxNew() - len(q.g.Result().OutputIDs)
	return s.cfg.WeightRemaining*float64(remaining) + s.cfg.WeightTemperature*q.opts.Temperature
}

// swappable reports whether q's blocks fit in the host tier now, so that
// evicting q costs copies rather than a recompute of its context.
func (s *Scheduler) swappable(q *seq) bool {
	return s.host.tier != nil && q.held > 0 && len(s.host.free) >= q.held
}

// protected reports whether q, resumed after a preemption, has yet to
// generate its RunQuantum tokens: until then it is evicted only when no
// unprotected job of its class is left.
func (s *Scheduler) protected(q *seq) bool {
	return q.stats.Preemptions > 0 && len(q.g.Result().OutputIDs) < q.protectUntil
}

// victimOrder sorts preemptible running jobs, the first evicted first:
// lowest class first; within a class jobs inside their run quantum last;
// then those the host tier can take now, by lowest score (the seed's
// contract), before those that could only be recomputed, by the fewest
// tokens to recompute (a recompute costs the victim's whole context, so
// the score, which picks the job closest to finishing, would pick the
// dearest one).
func (s *Scheduler) victimOrder(exclude *seq) []*seq {
	type cand struct {
		q               *seq
		fill, prot, rec bool
		score           float64
	}
	var cs []cand
	for _, q := range s.running {
		if !q.reserved && q != exclude {
			c := cand{q: q, fill: q == s.filler, prot: s.protected(q) || q.wholeSpan, rec: !s.swappable(q)}
			if c.rec {
				c.score = float64(q.computed)
			} else {
				c.score = s.score(q)
			}
			cs = append(cs, c)
		}
	}
	key := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		switch {
		case a.q.opts.Class != b.q.opts.Class:
			return b.q.opts.Class - a.q.opts.Class
		case a.fill != b.fill:
			return key(b.fill) - key(a.fill)
		case a.prot != b.prot:
			return key(a.prot) - key(b.prot)
		case a.rec != b.rec:
			return key(a.rec) - key(b.rec)
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		return 0
	})
	vs := make([]*seq, len(cs))
	for i, c := range cs {
		vs[i] = c.q
	}
	return vs
}

// privateBlocks counts the blocks only v holds (freed by evicting it).
func (s *Scheduler) privateBlocks(v *seq) int {
	n := 0
	v.eachPage(func(b int32) {
		if s.bm.ref[b] == 1 {
			n++
		}
	})
	return n
}

// shortOfMemory is why grow evicts: the arena ran out while a running job
// grew (rather than a higher class, or a reservation, wanting room).
const shortOfMemory = "KV memory ran short"

// pressure doubles the admission horizon after an eviction for memory,
// at most once a step and up to the model's context: admission had
// promised more than the arena holds, so it looks further ahead until a
// calm spell (see calm) shortens the look-ahead again.
func (s *Scheduler) pressure() {
	if s.pressed {
		return
	}
	s.pressed, s.calmSteps = true, 0
	s.horizon = min(2*s.horizon, max(s.cfg.RunQuantum, s.m.Context))
}

// calm ends a step's accounting for the horizon (admission calls it once
// a loop): after as many steps without an eviction for memory as the
// horizon is long, the horizon halves, down to RunQuantum, so admission
// grows optimistic again when jobs end sooner than their worst case.
func (s *Scheduler) calm() {
	if s.pressed {
		s.pressed = false
		return
	}
	if len(s.running) == 0 {
		return
	}
	s.calmSteps++
	if s.calmSteps >= s.horizon {
		s.horizon = max(s.horizon/2, s.cfg.RunQuantum)
		s.calmSteps = 0
	}
}

// preempt evicts q: its blocks go to the host tier when it has room,
// otherwise they are dropped and recomputed on resume.
func (s *Scheduler) preempt(q *seq, now time.Time, why string) {
	mode := "recompute"
	if err := s.swapOut(q); err != nil {
		mode = "recompute; swap-out failed: " + err.Error()
		s.cfg.Logger.Warn("sched: swap-out failed; the job will recompute", "err", err)
	} else if q.swap != nil {
		q.swapTokens, q.swapAt = q.computed, now
		mode = "swap"
	}
	q.highWater = max(q.highWater, q.computed)
	if q.stats.Preemptions > 0 && len(q.g.Result().OutputIDs) == q.resumeOut {
		s.noProgress.Add(1)
	}
	if why == shortOfMemory {
		s.pressure()
		q.wholeSpan = true
	}
	s.releaseBlocks(q)
	if s.filler == q {
		s.filler = nil
	}
	q.computed, q.registered = 0, 0
	q.running = false
	q.stats.Preemptions++
	s.running = slices.DeleteFunc(s.running, func(x *seq) bool { return x == q })
	s.waiting = append(s.waiting, q)
	s.held.note(heldMemory) // it waits for the room it gave up
	s.event(q, "preempted", fmt.Sprintf("%s (%s)", why, mode))
	if m := s.cfg.Metrics; m != nil {
		if q.swap != nil {
			m.preemptions.WithLabelValues("swap").Inc()
			m.swappedBytes.Add(float64(int64(len(q.swap)) * s.BlockBytes()))
		} else {
			m.preemptions.WithLabelValues("recompute").Inc()
		}
	}
}

// swapOut queues copies of q's blocks to free host slots and sets q.swap,
// unless the tier is off or too full, or the copies could not be queued
// (the error; q then recomputes). The blocks may be reused at once.
func (s *Scheduler) swapOut(q *seq) error {
	s.shrink(q)
	n := q.held
	if s.host.tier == nil || n == 0 || len(s.host.free) < n {
		return nil
	}
	slots := s.host.free[len(s.host.free)-n:]
	moves := make([]gpu.BlockMove, 0, n)
	q.eachPage(func(b int32) {
		moves = append(moves, gpu.BlockMove{From: int(b), To: slots[len(moves)]})
	})
	if err := s.host.tier.Out(moves); err != nil {
		return err
	}
	q.swap = slices.Clone(slots)
	q.swapLo, q.swapL = q.lo, q.logical()
	s.host.free = s.host.free[:len(s.host.free)-n]
	s.host.used += n
	return nil
}

// shrink releases q's blocks past its computed positions: a step's growth
// that q is preempted before (or during: a group's table may then be a
// block longer than another's) holds nothing yet, so a copy to the host
// keeps only what was computed, in tables of one length.
func (s *Scheduler) shrink(q *seq) {
	L := s.blocksFor(q.computed)
	for g, t := range q.tables {
		if len(t) <= L {
			continue
		}
		for _, b := range t[L:] {
			if b >= 0 {
				s.bm.release(b)
				q.held--
			}
		}
		q.tables[g] = t[:L]
	}
	q.lo = min(q.lo, L)
}

// swapIn gives q fresh blocks and queues the copies of its host slots into
// them; the next step's kernels see them. When the copies cannot be queued
// the blocks go back, *failed is set and q recomputes (it reports false).
// The tables are laid out as they were (eachPage's order, −1 where a
// windowed group had given its blocks back).
func (s *Scheduler) swapIn(q *seq, failed *error) bool {
	moves := make([]gpu.BlockMove, 0, len(q.swap))
	for g := range q.tables {
		for i := 0; i < q.swapL; i++ {
			if s.pg.local[g] && i < q.swapLo {
				q.tables[g] = append(q.tables[g], -1)
				continue
			}
			b, ok := s.bm.alloc()
			if !ok {
				panic("sched: admitted a swapped sequence without blocks")
			}
			q.tables[g] = append(q.tables[g], b)
			q.held++
			moves = append(moves, gpu.BlockMove{From: q.swap[len(moves)], To: int(b)})
		}
	}
	q.lo = q.swapLo
	err := s.host.tier.In(moves)
	s.dropSwap(q)
	if err != nil {
		s.releaseBlocks(q)
		*failed = err
		s.cfg.Logger.Warn("sched: swap-in failed; the job recomputes", "err", err)
		return false
	}
	q.computed = q.swapTokens
	return true
}
