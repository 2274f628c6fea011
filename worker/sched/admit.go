package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

func (s *Scheduler) enqueue(q *seq) {
	t := q.opts.Tenant
	if s.active[t] == 0 {
		// A tenant returning from idle starts level with the least-served
		// active tenant: idle time is not banked as credit.
		low, any := math.Inf(1), false
		for other, n := range s.active {
			if n > 0 {
				low, any = math.Min(low, s.served[other]), true
			}
		}
		if any && s.served[t] < low {
			s.served[t] = low
		}
	}
	s.active[t]++
	if q.opts.Class == 0 {
		s.lastHigh = time.Now()
		s.highPending.Store(false)
	}
	s.waiting = append(s.waiting, q)
}

// committed is the free blocks already promised: the outstanding worst
// case of reserved jobs, and the blocks admitted jobs still need for their
// prompts (they get them chunk by chunk). The filler's prompt is not
// promised: it takes only what is left.
func (s *Scheduler) committed() int {
	n := s.reservedOutstanding()
	for _, q := range s.running {
		if !q.reserved && q != s.filler {
			n += max(0, s.blocksFor(len(q.g.Tokens()))-len(q.blocks))
		}
	}
	return n
}

// reservedOutstanding is what reserved running jobs may still allocate.
func (s *Scheduler) reservedOutstanding() int {
	n := 0
	for _, q := range s.running {
		if q.reserved {
			n += max(0, q.worst-len(q.blocks))
		}
	}
	return n
}

// effClass is q's class after aging.
func (s *Scheduler) effClass(q *seq, now time.Time) int {
	c := q.opts.Class - int(now.Sub(q.enq)/s.cfg.AgingAfter)
	return max(c, 0)
}

// admissionNeed is the blocks q must get to be admitted now.
func (s *Scheduler) admissionNeed(q *seq) int {
	if q.swap != nil {
		return len(q.swap)
	}
	hits := s.prefixHits(q, false)
	if q.reserved {
		return max(0, q.worst-hits)
	}
	return s.blocksFor(len(q.g.Tokens())) - hits
}

// admit starts waiting jobs in priority order (with aging; within a class
// the least-served tenant first), preempting lower classes for higher ones.
// A job that does not fit is skipped, not waited on: no head-of-line
// blocking.
func (s *Scheduler) admit(now time.Time) {
	if len(s.waiting) == 0 {
		return
	}
	cands := s.admissionOrder(now)
	for _, q := range cands {
		need := s.admissionNeed(q)
		avail := s.bm.available() - s.reservedOutstanding()
		if !q.reserved {
			avail = s.bm.available() - s.committed()
			// Keep a block of headroom per running sequence, so admitting
			// this job does not force an eviction at the next step
			// (admission without headroom thrashes under tight memory).
			avail -= s.growingSoon()
		}
		slots := s.cfg.MaxRunning - len(s.running)
		if need > avail || slots <= 0 {
			// Preempt strictly lower classes to make room, lowest first.
			cls := s.effClass(q, now)
			var victims []*seq
			freed, freedSlots := 0, 0
			for _, v := range s.victimOrder(nil) {
				if need <= avail+freed && slots+freedSlots > 0 {
					break
				}
				if v.opts.Class <= cls {
					break
				}
				victims = append(victims, v)
				freed += s.privateBlocks(v)
				freedSlots++
			}
			if need > avail+freed || slots+freedSlots <= 0 {
				continue
			}
			for _, v := range victims {
				s.preempt(v, now, fmt.Sprintf("preempted for a class-%d job", cls))
			}
		}
		s.startSeq(q, now)
	}
	s.admitFiller(cands, now)
}

// admitFiller admits, when none is running, the first waiting job whose
// prompt does not fit whole but whose first prefill chunk fits in memory
// no one else is about to need.
func (s *Scheduler) admitFiller(cands []*seq, now time.Time) {
	if s.cfg.NoFiller || s.filler != nil || len(s.running) >= s.cfg.MaxRunning {
		return
	}
	free := s.bm.available() - s.committed() - s.growingSoon()
	for _, q := range cands {
		if q.running || q.finished || q.reserved || q.swap != nil {
			continue
		}
		hits := s.prefixHits(q, false)
		first := s.blocksFor(min(len(q.g.Tokens()), hits*s.bt+s.cfg.MaxBatchTokens)) - hits
		if first <= 0 || first > free || s.admissionNeed(q) <= free {
			continue
		}
		s.startSeq(q, now)
		s.filler = q
		s.fillers.Add(1)
		return
	}
}

// admissionOrder lists the waiting jobs in the order admission considers
// them: by class after aging; within a class the tenants' queues are
// interleaved, least-served tenant first, each tenant's jobs oldest first,
// so a batch fills fairly in one pass.
func (s *Scheduler) admissionOrder(now time.Time) []*seq {
	byClass := make([]map[string][]*seq, numClasses)
	for _, q := range s.waiting {
		c := s.effClass(q, now)
		if byClass[c] == nil {
			byClass[c] = map[string][]*seq{}
		}
		byClass[c][q.opts.Tenant] = append(byClass[c][q.opts.Tenant], q)
	}
	out := make([]*seq, 0, len(s.waiting))
	for _, tenants := range byClass {
		names := make([]string, 0, len(tenants))
		for t, qs := range tenants {
			slices.SortStableFunc(qs, func(a, b *seq) int { return a.enq.Compare(b.enq) })
			names = append(names, t)
		}
		slices.SortFunc(names, func(a, b string) int {
			sa, sb := s.served[a], s.served[b]
			switch {
			case sa < sb:
				return -1
			case sa > sb:
				return 1
			}
			return strings.Compare(a, b)
		})
		for i := 0; ; i++ {
			added := false
			for _, t := range names {
				if i < len(tenants[t]) {
					out = append(out, tenants[t][i])
					added = true
				}
			}
			if !added {
				break
			}
		}
	}
	return out
}

// growingSoon counts running non-reserved sequences that will need a new
// block within their next few tokens.
func (s *Scheduler) growingSoon() int {
	n := 0
	for _, q := range s.running {
		if !q.reserved && len(q.blocks)*s.bt-len(q.g.Tokens()) < 4 {
			n++
		}
	}
	return n
}

// startSeq moves q from waiting to running, restoring swapped blocks or
// taking cached prefix blocks.
func (s *Scheduler) startSeq(q *seq, now time.Time) {
	var swapErr error
	s.waiting = slices.DeleteFunc(s.waiting, func(x *seq) bool { return x == q })
	switch {
	case q.swap != nil && s.swapIn(q, &swapErr):
		s.event(q, "resumed", fmt.Sprintf("swapped in %d blocks", len(q.blocks)))
		if m := s.cfg.Metrics; m != nil {
			m.swapIns.Inc()
		}
	default:
		hits := s.prefixHits(q, true)
		q.computed = hits * s.bt
		if !q.admitted {
			q.stats.CachedInputTokens = min(q.computed, len(q.g.Request().PromptIDs))
		}
		if q.admitted {
			q.stats.RecomputedTokens += max(0, min(q.highWater, len(q.g.Tokens()))-q.computed)
			detail := fmt.Sprintf("recomputing %d tokens (%d from the prefix cache)", len(q.g.Tokens())-q.computed, q.computed)
			if swapErr != nil {
				detail += "; swap-in failed: " + swapErr.Error()
			}
			s.event(q, "resumed", detail)
		}
	}
	if !q.admitted {
		q.admitted = true
		q.stats.QueueMs = float64(now.Sub(q.submitted).Microseconds()) / 1000
		q.stats.QueueSteps = s.stepCount.Load() - q.submitStep
	}
	q.running = true
	s.running = append(s.running, q)
	slices.SortStableFunc(s.running, func(a, b *seq) int { return a.opts.Class - b.opts.Class })
}
