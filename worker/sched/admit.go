package sched

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
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
	}
	if q.opts.Class == 0 || q.opts.LowLatency {
		s.urgentPending.Store(false)
	}
	s.waiting = append(s.waiting, q)
}

// committed is the free blocks already promised: those the reserved jobs
// will still take at their peak (reservedAhead), and the blocks admitted
// jobs still need for their prompts (they get them chunk by chunk). The
// filler's prompt is not promised: it takes only what is left.
func (s *Scheduler) committed() int {
	n := s.reservedAhead(nil)
	for _, q := range s.running {
		if !q.reserved && q != s.filler {
			n += max(0, s.pagesAt(len(q.g.Tokens()), q.prefilling())-q.held)
		}
	}
	return n
}

// reservedAhead is the blocks beyond those they hold that the reserved
// running jobs, and q's prompt and generation when q is not nil (the job
// being admitted), will take at the peak of their use if every one of
// them generates one token a step up to its max_tokens (a job that stops
// earlier only lowers it). Reserved jobs are admitted only while the
// arena holds that peak, so none of them waits for a block on the way;
// the banker's rule (reserveFloor) is what still holds them safe when the
// steps do not go in step, as when a step runs high-priority jobs alone.
// Unlike the sum of their outstanding worst cases, the peak lets the
// blocks of a job near its end go to a newer job that needs them later.
func (s *Scheduler) reservedAhead(q *seq) int {
	ev := s.buf.peakEvents[:0]
	held, now := 0, 0
	// A job with ctx tokens, its prompt computed, holds pagesAt(ctx + t)
	// blocks at step t from now, up to its last step, rem−1; at rem its
	// private blocks go. A prompt still to compute (left tokens) takes
	// its blocks (at its chunks' peak) now and delays the rest by the
	// steps its chunks take.
	add := func(ctx, left, have, private, worstTokens int) {
		now += have
		lag := max(0, (left+s.cfg.MaxBatchTokens-1)/s.cfg.MaxBatchTokens-1)
		rem, cur := max(0, worstTokens-ctx), have
		if p := s.pagesAt(ctx, left > 1); p > cur {
			ev = append(ev, peakEvent{0, p - cur})
			cur = p
		}
		for n := s.blocksFor(ctx); ; n++ {
			t := max(0, n*s.bt+1-ctx) // the first step needing logical block n+1
			if t >= rem {
				break
			}
			if p := s.pagesAt(n*s.bt+1, false); p > cur {
				ev = append(ev, peakEvent{t + lag*min(t, 1), p - cur})
				cur = p
			}
		}
		ev = append(ev, peakEvent{rem + lag, -(private + cur - have)})
	}
	for _, r := range s.running {
		if r.reserved {
			held += r.held
			toks := len(r.g.Tokens())
			add(toks, toks-r.computed, r.held, s.privateBlocks(r), len(r.g.Request().PromptIDs)+r.g.MaxNew())
		}
	}
	if q != nil {
		hits := s.prefixHits(q, false)
		hp := s.hitPages(hits)
		held += hp
		toks := len(q.g.Tokens())
		add(toks, toks-hits*s.bt, hp, 0, len(q.g.Request().PromptIDs)+q.g.MaxNew())
	}
	s.buf.peakEvents = ev
	// Blocks freed at a step are there for the growth at the same step.
	slices.SortFunc(ev, func(a, b peakEvent) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.d, b.d)) })
	peak := now
	for _, e := range ev {
		now += e.d
		peak = max(peak, now)
	}
	return peak - held
}

// peakEvent is a change of d blocks in the reserved jobs' use at step t
// from now (reservedAhead).
type peakEvent struct{ t, d int }

// claim is a reserved job's standing in the banker's rule: the blocks it
// may still allocate, and those its end gives back.
type claim struct{ need, release int }

// claimOf is q's claim, as if it held more blocks than it does (more may
// be negative).
func (s *Scheduler) claimOf(q *seq, more int) claim {
	return claim{need: max(0, q.worst-q.held-more), release: s.privateBlocks(q) + more}
}

// reserveFloor is the fewest free blocks with which every reserved running
// job can still finish (the banker's safe state), with q's claim replaced
// by c when q is not nil: running, or the job being admitted. Ordinary
// jobs never take the arena below it (they are preempted instead), so it
// is what reserved jobs are sure to get; unlike the sum of their
// outstanding worst cases, it lets jobs near their end lend the blocks a
// newer one needs later.
func (s *Scheduler) reserveFloor(q *seq, c ...claim) int {
	cs := s.buf.claims[:0]
	for _, r := range s.running {
		if r.reserved && r != q {
			cs = append(cs, s.claimOf(r, 0))
		}
	}
	cs = append(cs, c...)
	s.buf.claims = cs
	return safeFloor(cs)
}

// safeFloor is the fewest free blocks with which every claim can be met in
// some order, each claim, once met, giving back its blocks to the next.
// With a single kind of resource the order of increasing need is the best
// one (a larger need never helps to go first), so only that order is
// checked. It sorts cs.
func safeFloor(cs []claim) int {
	slices.SortFunc(cs, func(a, b claim) int { return cmp.Compare(a.need, b.need) })
	floor, back := 0, 0
	for _, c := range cs {
		floor = max(floor, c.need-back)
		back += c.release
	}
	return floor
}

// prefilling reports whether q has prompt tokens left beyond the one its
// next decode feeds.
func (q *seq) prefilling() bool { return len(q.g.Tokens())-q.computed > 1 }

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
		return max(0, q.worst-s.hitPages(hits))
	}
	return s.pagesAt(len(q.g.Tokens()), true) - s.hitPages(hits)
}

// span is the tokens q will hold within the admission horizon: its
// context and its next horizon tokens, no more than its worst case (the
// prompt and max_tokens) or its memory cap. A job once evicted for memory
// (wholeSpan) looks to its worst case: its whole generation.
func (s *Scheduler) span(q *seq) int {
	n := s.worstSpan(q)
	if !q.wholeSpan {
		n = min(n, len(q.g.Tokens())+s.horizon)
	}
	return n
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
	s.held = heldNone
	s.calm()
	if len(s.waiting) == 0 {
		return
	}
	cands := s.admissionOrder(now)
	hold := 0
	room := s.prefillRoom(now)
	for _, q := range cands {
		if s.awaitsPrefix(q) {
			s.held.note(heldPrefix)
			continue
		}
		// A job is admitted when the next step can start its prompt:
		// admitted earlier it would hold its blocks and wait for the
		// prompts before it all the same, and the wait would count as its
		// time to first token rather than in the queue, where admission
		// can still choose (fairly, by priority) what runs next. A
		// high-priority job waits only for high-priority prompts (it gets
		// a step of its class alone); a reserved one has its blocks at
		// once.
		p := s.prefillOf(q)
		if p > 0 && !q.reserved && room.left(q.opts.Class) <= 0 {
			s.held.note(heldCompute)
			continue
		}
		need := s.admissionNeed(q)
		// The idle cached blocks q takes as prefix hits are not free for
		// the rest of its need (idleHitPages).
		free := s.bm.available()
		if q.swap == nil {
			free -= s.idleHitPages(q, s.prefixHits(q, false))
		}
		var fits, avail int
		if q.reserved {
			// q's prompt and the peak of its generation must fit beside
			// the reserved jobs running.
			fits, avail = s.reservedAhead(q), free
		} else {
			avail = free - s.committed() - s.growingSoon() - hold
			fits = max(need, s.pagesAt(s.span(q), false)-s.hitPages(s.prefixHits(q, false)))
		}
		slots := s.cfg.MaxRunning - len(s.running)
		if fits > avail || slots <= 0 {
			// Preempt lower classes to make room, lowest first; a reserved
			// job may also take the room of ordinary jobs of its own
			// class. The job's own class counts, not its class after
			// aging: aging orders the queue, and a job lifted to the class
			// of the running ones must not evict them (the evicted job,
			// as old, would evict it back).
			//
			// An ordinary job may also take the room of its own class's
			// jobs of a tenant running more than its share (fairShare.victim).
			cls := q.opts.Class
			var victims []*seq
			freed, freedSlots := 0, 0
			var fair *fairShare
			for _, v := range s.victimOrder(nil) {
				if fits <= avail+freed && slots+freedSlots > 0 {
					break
				}
				if v.opts.Class < cls {
					break
				}
				if v.opts.Class == cls && !q.reserved {
					if fair == nil {
						fair = s.fairShare(cls)
					}
					if !fair.victim(q, v) {
						continue
					}
				}
				victims = append(victims, v)
				freed += s.privateBlocks(v)
				if !q.reserved && v != s.filler {
					freed += s.soon(v) // its look-ahead goes with it
				}
				freedSlots++
			}
			if fits > avail+freed || slots+freedSlots <= 0 {
				if slots+freedSlots <= 0 {
					s.held.note(heldSlots)
				} else {
					s.held.note(heldMemory)
				}
				if q.reserved && hold == 0 {
					// What q needs free beyond what is already kept
					// free for the reserved jobs running.
					hold = max(0, fits-s.reservedAhead(nil))
				}
				if q.wholeSpan && !q.reserved && hold == 0 {
					// A job evicted for memory waits for its whole
					// span; the jobs after it must not take the
					// memory running jobs give back meanwhile, or a
					// long job would wait behind every shorter one.
					hold = fits
				}
				continue
			}
			for _, v := range victims {
				s.preempt(v, now, fmt.Sprintf("preempted for a class-%d job", cls))
			}
		}
		s.startSeq(q, now)
		room.take(q.opts.Class, p)
	}
	s.admitFiller(cands, now)
}

// prefillOf is the prompt tokens q will compute when admitted now: none
// when it resumes from the host tier, and none when all but its last
// token are in the prefix cache (its first step is then a decode).
func (s *Scheduler) prefillOf(q *seq) int {
	if q.swap != nil {
		return 0
	}
	n := len(q.g.Tokens()) - s.prefixHits(q, false)*s.bt
	if n <= 1 {
		return 0
	}
	return n
}

// prefillRoom is the prefill tokens the next step can run beyond those
// the running sequences' prompts still take: its budget (paced as the
// step will pace it) less their remaining prompt tokens, for the high
// class (whose prompts get steps of their own) and for the others.
func (s *Scheduler) prefillRoom(now time.Time) prefillRoom {
	var r prefillRoom
	r.high, r.low = s.budgets(now, false)
	for _, q := range s.running {
		if rem := len(q.g.Tokens()) - q.computed; rem > 1 {
			if q == s.filler {
				// The filler prefills only what the memory nobody
				// else needs holds: a filler waiting for memory must
				// not keep the jobs that fit out of the step.
				rem = s.fits(q, rem-1, q.held+max(0, s.bm.available()-s.committed()-s.growingAll()))
			}
			r.take(q.opts.Class, rem)
		}
	}
	return r
}

// prefillRoom is what is left of the next step's prefill budget for jobs
// of the high class and for the rest.
type prefillRoom struct{ high, low int }

func (r *prefillRoom) left(class int) int {
	if class == 0 {
		return r.high
	}
	return r.low
}

// take counts n prompt tokens of a class-class job against the budget.
func (r *prefillRoom) take(class, n int) {
	if class == 0 {
		r.high -= n
	}
	r.low -= n
}

// fairShare is what victim judges one candidate's victims by: the running
// sequences of its class per tenant (the candidate counted in once a
// victim is chosen), and the host tier slots the victims chosen so far
// will take.
type fairShare struct {
	s      *Scheduler
	runs   map[string]int
	host   int
	joined bool
}

func (s *Scheduler) fairShare(class int) *fairShare {
	return &fairShare{s: s, runs: s.runsByTenant(class)}
}

// runsByTenant counts the running sequences of class per tenant.
func (s *Scheduler) runsByTenant(class int) map[string]int {
	runs := map[string]int{}
	for _, r := range s.running {
		if r.opts.Class == class {
			runs[r.opts.Tenant]++
		}
	}
	return runs
}

// victim reports whether v, running in q's class for another tenant, may
// be preempted so that q runs, and counts it gone if so. Tenant fairness
// in a continuous batch is a matter of who holds the running slots (each
// running sequence gets a token a step), so when one tenant's backlog
// took the batch before another's jobs arrived, admission alone would
// leave the newcomer waiting for whole jobs to end. It holds when
//   - after the swap q's tenant still runs no more sequences of the class
//     for its weight than v's, and is not ahead of v's in tokens served
//     for its weight by more than shareQuantum unless v's tenant runs more
//     than one slot past its whole share: preemption moves the batch
//     toward the weighted shares and never past them, so two tenants
//     cannot evict each other back and forth (and admission fills freed
//     slots by the same measure: interleave); or
//   - q's tenant is behind v's by shareQuantum and would run at most one
//     sequence past its whole share (catchUp): the slot that does not
//     split by weight (2:1 over 14 slots is 9⅓ : 4⅔) then changes hands
//     as the served counters drift apart, and a tenant that lost tokens
//     (a slot that went to another tenant while its next job was still
//     on its way from the queue) wins them back, so over time the shares
//     are the weights' (the virtual token counter of Sheng et al., OSDI
//     '24), at two preemptions per turn;
//   - v goes to the host tier (a recompute costs its whole context:
//     waiting for a slot to free is cheaper than that) and is outside its
//     run quantum.
func (f *fairShare) victim(q, v *seq) bool {
	s := f.s
	t, u := q.opts.Tenant, v.opts.Tenant
	if t == u || s.protected(v) || s.host.tier == nil || v.held == 0 || len(s.host.free)-f.host < v.held {
		return false
	}
	mine := f.runs[t]
	if !f.joined {
		mine++
	}
	toward := float64(mine)/q.opts.Weight <= float64(f.runs[u]-1)/v.opts.Weight
	if toward && s.served[t] > s.served[u]+shareQuantum {
		// q's tenant is ahead: v's tenant may hold the slot it won back
		// (catchUp: one past its whole share) until they are level. A
		// tenant that holds more than that took the batch as a backlog
		// before q's came, and gives way by count, however new jobs'
		// prompts moved the counters.
		toward = float64(f.runs[u]) > math.Floor(exactShare(mine+f.runs[u]-1, v.opts.Weight, q.opts.Weight))+1
	}
	if !toward && !s.catchUp(q, v, mine, f.runs[u]) {
		return false
	}
	f.runs[t], f.joined = mine, true
	f.runs[u]--
	f.host += v.held
	return true
}

// shareQuantum is how far, in tokens served per unit of weight, one
// tenant must fall behind another before it may take the slot that does
// not split by weight from it (catchUp), and how far ahead a tenant may be
// and still take slots back toward its share: the larger, the fewer
// preemptions and the longer each turn.
const shareQuantum = 16

// catchUpQuantum is how far behind a tenant must fall before it may run a
// slot past its exact share where the slots do split by weight (5 of 8 at
// 1:1). Larger than shareQuantum: a new job's prompt moves its tenant's
// counter by tens of tokens at once, and such drifts even out without a
// preemption; a tenant whose next job was late from the queue while
// another's filled its slot loses hundreds.
const catchUpQuantum = 16 * shareQuantum

// catchUp reports whether q's tenant, which would run mine sequences of
// the class after taking a slot of v's tenant (which runs theirs now), may
// take it although that puts it past its share by count: only up to one
// slot past its whole share (before the swap it runs no more than the
// floor of its exact share of their slots), and only when it is behind
// v's tenant in tokens served for its weight (the served counters, prompt
// tokens included) by shareQuantum, or by catchUpQuantum where it already
// runs its exact share.
func (s *Scheduler) catchUp(q, v *seq, mine, theirs int) bool {
	// Never v's tenant's only sequence: that slot is then the whole of
	// that tenant's share, and taking it would stop the tenant, not trim
	// it (a one-slot batch, or a tenant's last job).
	if theirs <= 1 {
		return false
	}
	exact := exactShare(mine+theirs-1, q.opts.Weight, v.opts.Weight)
	before := float64(mine - 1)
	quantum := float64(shareQuantum)
	if before >= exact {
		quantum = catchUpQuantum
	}
	return before <= math.Floor(exact) && s.served[q.opts.Tenant]+quantum < s.served[v.opts.Tenant]
}

// exactShare is the slots, of n split between two tenants by weight, that
// are the share of the one weighing w (the other weighs other).
func exactShare(n int, w, other float64) float64 {
	return float64(n) * w / (w + other)
}

// admitFiller admits, when none is running, the first waiting job whose
// prompt does not fit whole but whose first prefill chunk fits in memory
// no one else will need: beyond what the running jobs need to the end of
// their generations (growingAll), so that the filler's prompt never has
// to make way for their growth.
func (s *Scheduler) admitFiller(cands []*seq, now time.Time) {
	if s.cfg.NoFiller || s.filler != nil || len(s.running) >= s.cfg.MaxRunning {
		return
	}
	free := s.bm.available() - s.committed() - s.growingSoon()
	spare := s.bm.available() - s.committed() - s.growingAll()
	for _, q := range cands {
		if (q.reserved || q.wholeSpan) && !q.running && !q.finished {
			// Memory left is the waiting reserved job's, or the one's
			// evicted for memory (admit holds it for them).
			return
		}
		if q.running || q.finished || q.reserved || q.swap != nil || s.awaitsPrefix(q) {
			continue
		}
		hits := s.prefixHits(q, false)
		hp := s.hitPages(hits)
		idle := s.idleHitPages(q, hits)
		first := s.needPages(hits*s.bt, min(len(q.g.Tokens()), hits*s.bt+s.cfg.MaxBatchTokens)) - hp
		if first <= 0 || first > spare-idle || max(s.pagesAt(len(q.g.Tokens()), true), s.pagesAt(s.span(q), false))-hp <= free-idle {
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
// interleaved so the batch fills toward the tenants' weighted shares
// (interleave), each tenant's jobs oldest first.
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
	for c, tenants := range byClass {
		if tenants == nil {
			continue
		}
		runs := s.runsByTenant(c)
		// Reserved jobs first: their worst case rarely fits after the
		// ordinary jobs have taken their prompts.
		out = s.interleave(out, tenants, true, runs)
		out = s.interleave(out, tenants, false, runs)
	}
	return out
}

// interleave appends to out the jobs of tenants (one class) that are
// reserved or not as asked, in the order that evens the class's batch out
// by weight: each next job is the oldest of the tenant that would then run
// the fewest sequences of the class for its weight, counting in runs those
// running and those already placed in out (runs is updated); ties go to
// the tenant served the fewest tokens for its weight, then by name. In a
// continuous batch every running sequence gets a token a step, so shares
// of the batch are shares of the output tokens.
func (s *Scheduler) interleave(out []*seq, all map[string][]*seq, reserved bool, runs map[string]int) []*seq {
	h := &tenantHeap{s: s, runs: runs}
	for t, qs := range all {
		var mine []*seq
		for _, q := range qs {
			if q.reserved == reserved {
				mine = append(mine, q)
			}
		}
		if len(mine) > 0 {
			slices.SortStableFunc(mine, func(a, b *seq) int { return a.enq.Compare(b.enq) })
			h.q = append(h.q, tenantQueue{tenant: t, jobs: mine})
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		tq := &h.q[0]
		out = append(out, tq.jobs[0])
		tq.jobs = tq.jobs[1:]
		runs[tq.tenant]++
		if len(tq.jobs) == 0 {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out
}

// tenantQueue is one tenant's waiting jobs of a class, oldest first.
type tenantQueue struct {
	tenant string
	jobs   []*seq
}

// tenantHeap orders tenant queues for interleave.
type tenantHeap struct {
	s    *Scheduler
	runs map[string]int
	q    []tenantQueue
}

func (h *tenantHeap) Len() int      { return len(h.q) }
func (h *tenantHeap) Swap(i, j int) { h.q[i], h.q[j] = h.q[j], h.q[i] }
func (h *tenantHeap) Push(x any)    { h.q = append(h.q, x.(tenantQueue)) }
func (h *tenantHeap) Pop() any {
	x := h.q[len(h.q)-1]
	h.q = h.q[:len(h.q)-1]
	return x
}

func (h *tenantHeap) Less(i, j int) bool {
	a, b := h.q[i].tenant, h.q[j].tenant
	// A tenant's jobs carry its weight (JobOpts.Weight).
	ra := float64(h.runs[a]+1) / h.q[i].jobs[0].opts.Weight
	rb := float64(h.runs[b]+1) / h.q[j].jobs[0].opts.Weight
	switch {
	case ra != rb:
		return ra < rb
	case h.s.served[a] != h.s.served[b]:
		return h.s.served[a] < h.s.served[b]
	}
	return a < b
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
	have := max(q.held, s.pagesAt(len(q.g.Tokens()), q.prefilling()))
	return max(0, s.pagesAt(s.span(q), false)-have)
}

// growingAll counts the blocks running ordinary sequences (the filler
// aside) will need to reach their worst case (the prompt and max_tokens,
// or their cap) beyond what they hold and what committed promises them:
// the memory the filler leaves them.
func (s *Scheduler) growingAll() int {
	n := 0
	for _, q := range s.running {
		if !q.reserved && q != s.filler {
			have := max(q.held, s.pagesAt(len(q.g.Tokens()), q.prefilling()))
			n += max(0, s.pagesAt(s.worstSpan(q), false)-have)
		}
	}
	return n
}

// worstSpan is the most tokens q can hold: its prompt and max_tokens, no
// more than its memory cap.
func (s *Scheduler) worstSpan(q *seq) int {
	n := len(q.g.Request().PromptIDs) + q.g.MaxNew()
	if q.maxBlocks > 0 {
		n = min(n, s.tokensIn(q.maxBlocks))
	}
	return max(n, len(q.g.Tokens()))
}

// startSeq moves q from waiting to running, restoring swapped blocks or
// taking cached prefix blocks.
func (s *Scheduler) startSeq(q *seq, now time.Time) {
	var swapErr error
	s.waiting = slices.DeleteFunc(s.waiting, func(x *seq) bool { return x == q })
	switch {
	case q.swap != nil && s.swapIn(q, &swapErr):
		s.event(q, "resumed", fmt.Sprintf("swapped in %d blocks", q.held))
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
		s.fresh.add(q.opts.Class, q.opts.Tenant, -1)
		s.freshTaken = true
		q.admitted = true
		q.stats.QueueMs = float64(now.Sub(q.submitted).Microseconds()) / 1000
		q.g.Admitted(now)
		q.admitStep = s.stepCount.Load()
		q.stats.QueueSteps = q.admitStep - q.submitStep
		q.stats.Reserved = q.reserved
		if m := s.cfg.Metrics; m != nil {
			m.admitted(q.reserved)
		}
	}
	q.running = true
	s.running = append(s.running, q)
	slices.SortStableFunc(s.running, func(a, b *seq) int { return a.opts.Class - b.opts.Class })
}
