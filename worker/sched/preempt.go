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

// victimOrder sorts preemptible running jobs: lowest class first, then
// lowest score.
func (s *Scheduler) victimOrder(exclude *seq) []*seq {
	var vs []*seq
	for _, q := range s.running {
		if !q.reserved && q != exclude {
			vs = append(vs, q)
		}
	}
	slices.SortStableFunc(vs, func(a, b *seq) int {
		if a.opts.Class != b.opts.Class {
			return b.opts.Class - a.opts.Class
		}
		sa, sb := s.score(a), s.score(b)
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	return vs
}

// privateBlocks counts the blocks only v holds (freed by evicting it).
func (s *Scheduler) privateBlocks(v *seq) int {
	n := 0
	for _, b := range v.blocks {
		if s.bm.ref[b] == 1 {
			n++
		}
	}
	return n
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
	s.releaseBlocks(q)
	if s.filler == q {
		s.filler = nil
	}
	q.computed, q.registered = 0, 0
	q.running = false
	q.stats.Preemptions++
	s.running = slices.DeleteFunc(s.running, func(x *seq) bool { return x == q })
	s.waiting = append(s.waiting, q)
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
	n := len(q.blocks)
	if s.host.tier == nil || n == 0 || len(s.host.free) < n {
		return nil
	}
	slots := s.host.free[len(s.host.free)-n:]
	moves := make([]gpu.BlockMove, n)
	for i, b := range q.blocks {
		moves[i] = gpu.BlockMove{From: int(b), To: slots[i]}
	}
	if err := s.host.tier.Out(moves); err != nil {
		return err
	}
	q.swap = slices.Clone(slots)
	s.host.free = s.host.free[:len(s.host.free)-n]
	s.host.used += n
	return nil
}

// swapIn gives q fresh blocks and queues the copies of its host slots into
// them; the next step's kernels see them. When the copies cannot be queued
// the blocks go back, *failed is set and q recomputes (it reports false).
func (s *Scheduler) swapIn(q *seq, failed *error) bool {
	moves := make([]gpu.BlockMove, len(q.swap))
	for i, slot := range q.swap {
		b, ok := s.bm.alloc()
		if !ok {
			panic("sched: admitted a swapped sequence without blocks")
		}
		q.blocks = append(q.blocks, b)
		moves[i] = gpu.BlockMove{From: slot, To: int(b)}
	}
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
