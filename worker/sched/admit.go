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
	s.enqueued[q.opts.Class]++
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

// span is the tokens q will hold within the admission horizon: its
// context and its next horizon tokens, no more than its worst case (the
// prompt and max_tokens) or its memory cap.
func (s *Scheduler) span(q *seq) int {
	n := min(len(q.g.Tokens())+s.horizon, len(q.g.Request().PromptIDs)+q.g.MaxNew())
	if q.maxBlocks > 0 {
		n = min(n, q.maxBlocks*s.bt)
	}
	return max(n, len(q.g.Tokens()))
}

// admit starts waiting jobs in priority order (with aging; within a class
// reserved jobs first, then the least-served tenant first), preempting
// lower classes for higher ones. A job that does not fit is skipped, not
// waited on: no head-of-line blocking; but the first reserved job that
// does not fit holds its blocks against the ordinary jobs after it, so
// they cannot crowd it out.
//
// An ordinary job is admitted only when the arena holds, beside what is
// promised, the next horizon tokens of every running job and of itself
// (growingSoon): admitting it must not force an eviction within the
// horizon. Evictions for memory lengthen the horizon (pressure), calm
// steps shorten it.
func (s *Scheduler) admit(now time.Time) {
	s.calm()
	if len(s.waiting) == 0 {
		return
	}
	cands := s.admissionOrder(now)
	hold := 0
	for _, q := range cands {
		if s.awaitsPrefix(q) {
			continue
		}
		need := s.admissionNeed(q)
		fits := need
		avail := s.bm.available() - s.reservedOutstanding()
		if !q.reserved {
			avail = s.bm.available() - s.committed() - s.growingSoon() - hold
			fits = max(need, s.blocksFor(s.span(q))-s.prefixHits(q, false))
		}
		slots := s.cfg.MaxRunning - len(s.running)
		if fits > avail || slots <= 0 {
			// Preempt lower classes to make room, lowest first; a reserved
			// job may also take the room of ordinary jobs of its own
			// class. The job's own class counts, not its class after
			// aging: aging orders the queue, and a job lifted to the class
			// of the running ones must not evict them (the evicted job,
			// as old, would evict it back).
			cls := q.opts.Class
			var victims []*seq
			freed, freedSlots := 0, 0
			for _, v := range s.victimOrder(nil) {
				if fits <= avail+freed && slots+freedSlots > 0 {
					break
				}
				if v.opts.Class < cls || (v.opts.Class == cls && !q.reserved) {
					break
				}
				victims = append(victims, v)
				freed += s.privateBlocks(v)
				if !q.reserved && v != s.filler {
					freed += s.soon(v) // its look-ahead goes with it
				}
				freedSlots++
			}
			if fits > avail+freed || slots+freedSlots <= 0 {
				if q.reserved && hold == 0 {
					hold = need
				}
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
		if q.reserved && !q.running && !q.finished {
			return // memory left is the waiting reserved job's
		}
		if q.running || q.finished || q.reserved || q.swap != nil || s.awaitsPrefix(q) {
			continue
		}
		hits := s.prefixHits(q, false)
		first := s.blocksFor(min(len(q.g.Tokens()), hits*s.bt+s.cfg.MaxBatchTokens)) - hits
		if first <= 0 || first > free || s.blocksFor(s.span(q))-hits <= free {
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
		// Reserved jobs first: their worst case rarely fits after the
		// ordinary jobs have taken their prompts.
		out = s.interleave(out, tenants, true)
		out = s.interleave(out, tenants, false)
	}
	return out
}

// interleave appends to out the jobs of tenants (one class) that are
// reserved or not as asked: the tenants' queues interleaved, least-served
// tenant first, each tenant's jobs oldest first.
func (s *Scheduler) interleave(out []*seq, all map[string][]*seq, reserved bool) []*seq {
	tenants := map[string][]*seq{}
	for t, qs := range all {
		for _, q := range qs {
			if q.reserved == reserved {
				tenants[t] = append(tenants[t], q)
			}
		}
	}
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
	return out
}

// growingSoon counts the blocks running ordinary sequences (the filler
// aside) will need within the admission horizon beyond what they hold and
// what committed already promises them.
func (s *Scheduler) growingSoon() int {
	n := 0
	for _, q := range s.running {
		if !q.reserved && q != s.filler {
			n += s.soon(q)
		}
	}
	return n
}

// soon is the blocks q will need within the horizon beyond what it holds
// and what committed promises it.
func (s *Scheduler) soon(q *seq) int {
	have := max(len(q.blocks), s.blocksFor(len(q.g.Tokens())))
	return max(0, s.blocksFor(s.span(q))-have)
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
	if q.stats.Preemptions > 0 {
		q.resumeOut = len(q.g.Result().OutputIDs)
		q.protectUntil = q.resumeOut + s.cfg.RunQuantum
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
