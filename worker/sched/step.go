package sched

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
)

// grow gives q the blocks for a step computing its positions up to
// to−1, from q.computed: each group's table covers them, a windowed
// group's only from the window of q.computed (pages). It preempts others
// (or q itself) when memory runs short, and reports whether q got them:
// an ordinary q that did not was preempted; a reserved one still runs,
// and waits (skips steps) until the blocks it needs are sure not to keep
// another reserved job from finishing (the banker's rule: one that can
// always finishes, and gives its blocks back).
func (s *Scheduler) grow(q *seq, to int, now time.Time) bool {
	s.trim(q)
	L, keep := s.blocksFor(to), s.keepFrom(q.computed)
	for g := 0; g < s.pg.groups; g++ {
		for len(q.tables[g]) < L {
			i := len(q.tables[g])
			if s.pg.local[g] && i < keep {
				q.tables[g] = append(q.tables[g], -1) // before the window: never held
				continue
			}
			b, ok := s.allocFor(q, now)
			if !ok {
				return false
			}
			q.tables[g] = append(q.tables[g], b)
			q.held++
		}
	}
	q.lo = max(q.lo, min(keep, L))
	s.noteMemory(q)
	return true
}

// allocFor takes a block for q, preempting others (or q) when memory runs
// short; false when q was preempted or, reserved, must wait.
func (s *Scheduler) allocFor(q *seq, now time.Time) (int32, bool) {
	for {
		short := s.bm.available()-s.reservedAhead(nil) <= 0
		if q.reserved {
			short = s.bm.available()-1 < s.reserveFloor(q, s.claimOf(q, 1))
		}
		if short {
			vs := s.victimOrder(nil)
			if q.reserved && len(vs) == 0 {
				s.reservedWaits.Add(1)
				if m := s.cfg.Metrics; m != nil {
					m.reservedWaits.Inc()
				}
				return 0, false
			}
			if len(vs) == 0 || vs[0] == q {
				s.preempt(q, now, shortOfMemory)
				return 0, false
			}
			s.preempt(vs[0], now, shortOfMemory)
			continue
		}
		b, ok := s.bm.alloc()
		if !ok {
			// The floor kept a block free for q.
			panic("sched: KV arena exhausted under a reservation")
		}
		return b, true
	}
}

// fits is the most of q's next n prompt tokens (at least 0) whose step
// keeps q within blocks blocks.
func (s *Scheduler) fits(q *seq, n, blocks int) int {
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.needPages(q.computed, q.computed+mid) <= blocks {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// highTrafficWindow is how long after a high-priority submission lower
// classes prefill in small chunks.
const highTrafficWindow = 10 * time.Second

// highBeforeFirstToken reports whether q is a high-priority job that has
// not yet produced its first token.
func (q *seq) highBeforeFirstToken() bool {
	return q.opts.Class == 0 && len(q.g.Result().OutputIDs) == 0 && !q.g.Done()
}

// carriesHighPrompt reports whether plan holds a high-priority job before
// its first token.
func carriesHighPrompt(plan []stepRow) bool {
	return slices.ContainsFunc(plan, func(r stepRow) bool { return r.q.highBeforeFirstToken() })
}

// stepRow is one sequence's share of a step.
type stepRow struct {
	q       *seq
	n       int  // tokens fed
	samples bool // the row reaches the end of q's tokens: it samples
	// draft, when set, is fed after q's last token (n is 1+len(draft)),
	// and every one of the n rows is sampled in turn while the model
	// agrees with it (draft.go).
	draft []int32
}

// step runs one forward pass: a decode token for every running sequence
// and prefill chunks within MaxBatchTokens.
func (s *Scheduler) step() {
	plan := s.planStep(time.Now())
	if len(plan) == 0 {
		return
	}
	high := carriesHighPrompt(plan)
	if p, ok := s.host.tier.(gpu.Pauser); ok && high {
		// The tier's background work waits for this step: it would take
		// a processor from it (gpu.Pauser).
		p.Pause()
		defer p.Resume()
	}
	began := time.Now()
	toks, logits, err := s.forward(plan, high)
	s.lastInterrupted = errors.Is(err, model.ErrInterrupted)
	if s.lastInterrupted {
		s.interrupted.Add(1)
		if m := s.cfg.Metrics; m != nil {
			m.interrupted.Inc()
		}
		return
	}
	if err != nil {
		for _, r := range plan {
			s.finish(r.q, "", fmt.Errorf("sched: forward pass: %w", err))
		}
		return
	}
	s.stepCount.Add(1)
	if n := int64(len(plan)); n > s.mostInStep.Load() {
		s.mostInStep.Store(n)
	}
	s.pace.observe(planShape(plan), time.Since(began))
	s.countDuplicated(plan)
	var held, slots int64
	for _, q := range s.running {
		held += int64(q.computed)
		slots += int64(q.logical() * s.bt)
	}
	s.utilTokens.Add(held)
	s.utilSlots.Add(slots)
	if len(s.waiting) > 0 {
		if s.held&(heldMemory|heldSlots) != 0 {
			// How admission saw the arena: in use, promised to admitted
			// prompts, kept for the running jobs' growth, and free.
			free := s.bm.available()
			promised := min(free, s.committed())
			soon := min(free-promised, s.growingSoon())
			s.occUsed.Add(int64(s.bm.used()))
			s.occPromised.Add(int64(promised))
			s.occSoon.Add(int64(soon))
			s.occSteps.Add(1)
		}
		if i := s.held.first(); i >= 0 {
			s.waitSteps[i].Add(1)
			if m := s.cfg.Metrics; m != nil {
				m.waitSteps[i].Inc()
			}
		}
	}
	s.applyStep(plan, logits)
	if m := s.cfg.Metrics; m != nil {
		m.stepTokens.Observe(float64(len(toks)))
	}
}

// planStep chooses this step's rows: a decode token for every running
// sequence and prefill chunks within MaxBatchTokens, growing each row's
// blocks (which may preempt others). Rows whose sequence was preempted
// meanwhile are left out.
func (s *Scheduler) planStep(now time.Time) []stepRow {
	// A high-priority job waiting for its first token gets a step of its
	// class alone: lower classes skip one step rather than lengthen the
	// high-priority job's time to first token. Not the filler: it runs
	// only on memory the others will not need, so the others' steps are
	// what gives it room (held up for it, they would wait on each other).
	onlyHigh := slices.ContainsFunc(s.running, func(q *seq) bool { return q.highBeforeFirstToken() && q != s.filler })
	budget, lowBudget := s.budgets(now, onlyHigh)
	if budget < s.cfg.MaxBatchTokens {
		s.paced.Add(1)
	}
	var plan []stepRow
	for _, q := range slices.Clone(s.running) {
		if !q.running {
			continue // preempted while planning this step
		}
		if onlyHigh && q.opts.Class != 0 {
			continue
		}
		if q.opts.Class != 0 {
			budget = min(budget, lowBudget)
		}
		toks := q.g.Tokens()
		rem := len(toks) - q.computed
		n := 1
		if rem > 1 || s.m.Encoder {
			n = min(rem, budget)
			if s.m.Encoder {
				// An encoder's input attends to all of itself: whole, in
				// one step, whatever the budget.
				n = rem
			}
			if q == s.filler {
				// Only blocks the others will not need to the end of
				// their generations (growingAll); no preemption.
				free := max(0, s.bm.available()-s.committed()-s.growingAll())
				if n = s.fits(q, n, q.held+free); s.m.Encoder && n < rem {
					n = 0 // whole or not at all
				}
			}
			if n <= 0 {
				continue
			}
		} else if q == s.filler {
			s.filler = nil // prefilled: an ordinary job from now on
		}
		if q.maxBlocks > 0 && s.needPages(q.computed, q.computed+n) > q.maxBlocks {
			s.finish(q, engine.StopMemoryLimit, nil)
			continue
		}
		if !s.grow(q, q.computed+n, now) {
			continue
		}
		if rem > 1 {
			budget -= n
		}
		plan = append(plan, stepRow{q: q, n: n, samples: q.computed+n == len(toks) && q.emb == nil})
	}
	// A sequence planned early may have been preempted by a later one's
	// growth: drop it from this step.
	plan = slices.DeleteFunc(plan, func(r stepRow) bool { return !r.q.running })
	s.addDrafts(plan, budget, now)
	return plan
}

// forward runs plan's rows through the model in the reused step buffers
// and returns the tokens fed and the logits of the sampling rows, in plan
// order; high says the plan carries a high-priority job's prompt
// (carriesHighPrompt). It returns model.ErrInterrupted when a
// high-priority arrival stopped the step.
func (s *Scheduler) forward(plan []stepRow, high bool) ([]int32, []float32, error) {
	// Step buffers are reused: the decode path allocates nothing per step.
	toks, pos, seqIdx, rows, hrows := s.buf.toks[:0], s.buf.pos[:0], s.buf.seq[:0], s.buf.rows[:0], s.buf.hrows[:0]
	if len(s.buf.tables) != s.pg.groups {
		s.buf.tables = make([][][]int32, s.pg.groups)
		s.buf.batches = make([]gpu.Batch, s.pg.groups)
	}
	tables := s.buf.tables
	for g := range tables {
		tables[g] = tables[g][:0]
	}
	for i, r := range plan {
		all := r.q.g.Tokens()
		fed := r.n - len(r.draft)
		for j := 0; j < r.n; j++ {
			if j < fed {
				toks = append(toks, all[r.q.computed+j])
			} else {
				toks = append(toks, r.draft[j-fed])
			}
			pos = append(pos, int32(r.q.computed+j))
			seqIdx = append(seqIdx, int32(i))
			if r.q.emb != nil && r.q.emb.pool.Needs(r.q.computed+j) {
				hrows = append(hrows, int32(len(toks)-1))
			}
		}
		for g := range tables {
			tables[g] = append(tables[g], r.q.tables[g])
		}
		if r.samples {
			// A drafted row samples its last token and every draft token.
			for j := fed - 1; j < r.n; j++ {
				rows = append(rows, int32(len(toks)-r.n+j))
			}
		}
	}
	s.buf.toks, s.buf.pos, s.buf.seq, s.buf.rows, s.buf.hrows = toks, pos, seqIdx, rows, hrows
	if need := len(rows) * s.m.Vocab; cap(s.buf.logits) < need {
		s.buf.logits = make([]float32, need)
	}
	logits := s.buf.logits[:len(rows)*s.m.Vocab]
	if need := len(hrows) * s.m.Dim; cap(s.buf.hidden) < need {
		s.buf.hidden = make([]float32, need)
	}
	hidden := s.buf.hidden[:len(hrows)*s.m.Dim]
	// The sequences sampling this step compute their tool masks while the
	// forward pass runs.
	var masks sync.WaitGroup
	for _, r := range plan {
		if r.samples && r.q.g.HasTools() {
			masks.Add(1)
			go func(g *engine.Generation) {
				defer masks.Done()
				g.PrefetchMask(s.m.Vocab)
			}(r.q.g)
		}
	}
	// A step gives way to a high-priority (or low_latency) job that
	// arrives while it runs: it stops within half a layer and is run again,
	// with the new job, after admission. Nothing is lost but the layers
	// already done (the rerun writes the same K and V). Only a step
	// carrying a high-priority job's prompt runs to its end: that job's
	// first token is what an arrival would be preferred for. A step with
	// high-priority decodes gives way too (they lose a part of one step;
	// the arrival would otherwise wait for a whole one). Taking the flag
	// means one arrival stops at most one step, and a step right after an
	// interrupted one always completes, so arrivals faster than steps
	// cannot starve the rest.
	var stop func() bool
	if s.interruptible && !s.lastInterrupted && !high {
		stop = func() bool { return s.urgentPending.Swap(false) }
	}
	for g := range s.buf.batches {
		s.buf.batches[g] = gpu.Batch{Pos: pos, Seq: seqIdx, Tables: tables[g], Group: g}
	}
	var err error
	if s.m.Encoder {
		err = s.encode(toks, hrows, hidden)
	} else {
		err = s.m.ForwardGroupsHidden(s.kv, toks, s.buf.batches, rows, logits, hrows, hidden, stop)
	}
	masks.Wait()
	return toks, logits, err
}

// applyStep takes the results of a completed step: it advances each row's
// sequence, feeds the prefix cache and the fairness counters, and samples
// the rows at the end of their tokens, finishing or restarting their jobs.
// A drafted row advances by its last token and the draft tokens the
// model agreed with (draft.go).
func (s *Scheduler) applyStep(plan []stepRow, logits []float32) {
	done := time.Now()
	obs := s.buf.observe[:0]
	row, hrow := 0, 0
	for _, r := range plan {
		q := r.q
		fed := r.n - len(r.draft)
		from := q.computed
		q.computed += fed
		q.highWater = max(q.highWater, q.computed)
		s.served[q.opts.Tenant] += float64(fed) / q.opts.Weight
		s.registerFull(q)
		s.trim(q)
		if q.emb != nil {
			// Its rows' states, in the order forward asked for them;
			// at its last position the input is finished and its
			// blocks given back (to the prefix cache).
			s.takeHidden(q, from, q.computed, s.buf.hidden, &hrow)
		}
		if r.samples { // a prefill chunk has no logits yet
			obs = append(obs, observation{q: q, row: row, draft: r.draft})
			row += 1 + len(r.draft)
		}
	}
	s.buf.observe = obs
	observeAll(obs, logits, s.m.Vocab, done, s.hostFor)
	for _, o := range obs {
		q := o.q
		q.stats.SampleSteps++
		if len(o.draft) > 0 {
			q.stats.DraftedTokens += len(o.draft)
			q.stats.AcceptedDraftTokens += o.accepted
			s.noteDraft(q.dr.last, len(o.draft), o.accepted)
			q.dr.verified(len(o.draft), o.accepted)
			s.served[q.opts.Tenant] += float64(o.accepted) / q.opts.Weight
			if o.ok {
				// The accepted tokens' K and V are q's now. Not when the
				// generation ended (q is finished below) or restarted for
				// a retry (its tokens are the prompt again: restart
				// rewinds q, and nothing past the prompt may be hashed
				// into the prefix cache).
				q.computed += o.accepted
				q.highWater = max(q.highWater, q.computed)
				s.registerFull(q)
				s.trim(q)
			}
		}
	}
	if s.stepTokens != nil || s.cfg.Metrics != nil {
		// Reused, like the other step buffers.
		got := s.buf.tenantTokens
		if got == nil {
			got = map[string]int{}
			s.buf.tenantTokens = got
		}
		clear(got)
		for _, o := range obs {
			got[o.q.opts.Tenant] += 1 + o.accepted
		}
		if s.stepTokens != nil {
			s.stepTokens(got)
		}
		if m := s.cfg.Metrics; m != nil {
			if s.buf.tenantCounters == nil {
				s.buf.tenantCounters = map[string]prometheus.Counter{}
			}
			for t, n := range got {
				c := s.buf.tenantCounters[t]
				if c == nil {
					c = m.tenantTokens.WithLabelValues(t)
					s.buf.tenantCounters[t] = c
				}
				c.Add(float64(n))
			}
		}
	}
	for _, o := range obs {
		q := o.q
		if q.stats.FirstTokenSteps == 0 && len(q.g.Result().OutputIDs) > 0 {
			q.stats.FirstTokenSteps = s.stepCount.Load() - q.admitStep
		}
		if !o.ok {
			if q.g.Done() {
				s.finish(q, "", nil)
			} else {
				s.restart(q)
			}
		}
	}
}

// observation is one sampling row of a step: its sequence, where its
// logits begin (in rows), its draft, and, once observed, whether its
// generation goes on after the tokens it sampled and how many draft
// tokens it accepted.
type observation struct {
	q        *seq
	row      int
	draft    []int32
	ok       bool
	accepted int
}

// observeAll has each row's generation observe its logits (row i's are
// logits[i·vocab:]): masks, sampling, stop strings, tools and the token's
// delivery. Rows are independent (each generation has its own sampler,
// tools and sink), so they run in parallel: sampling reads the whole
// vocabulary for every row (its arg max and log-sum-exp, and at a
// temperature its weights), work that grows with the batch
// (BenchmarkSample/vocab32000: 19 µs a greedy
// row, 38 at top-k 40, 113 at top-p alone, on the vector kernels; ten
// times that in scalar Go, which made 16 rows about 1.5 ms of a 14 ms
// step on two goroutines). Inside a step a greedy row takes 35–43 µs: its
// logits, and the sampler's copy of them, come from L3 or memory there
// (134M model, 16 rows, two threads: 0.3–0.5 ms a step).
//
// hostFor, when the backend computes on the host's processors
// (gpu.HostParallel), runs the rows on the backend's threads, which have
// just finished the forward pass and watch for its next operation (a
// goroutine started here would wait behind them); otherwise the rows run
// on up to GOMAXPROCS goroutines, the caller's one of them.
func observeAll(obs []observation, logits []float32, vocab int, now time.Time, hostFor func(n int, fn func(lo, hi int))) {
	one := func(i int) {
		o := &obs[i]
		g := o.q.g
		// Row j samples the token after the draft's first j tokens; it
		// is the model's own only while every one of them was.
		for j := 0; ; j++ {
			r := o.row + j
			_, o.ok = g.Observe(logits[r*vocab:(r+1)*vocab], now)
			if !o.ok || j == len(o.draft) {
				return
			}
			if h := g.Tokens(); h[len(h)-1] != o.draft[j] {
				return
			}
			o.accepted++
		}
	}
	if hostFor != nil && len(obs) > 1 {
		hostFor(len(obs), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				one(i)
			}
		})
		return
	}
	workers := min(len(obs), runtime.GOMAXPROCS(0)) - 1
	if workers <= 0 {
		for i := range obs {
			one(i)
		}
		return
	}
	var next atomic.Int64
	take := func() {
		for i := int(next.Add(1) - 1); i < len(obs); i = int(next.Add(1) - 1) {
			one(i)
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			take()
		}()
	}
	take()
	wg.Wait()
}

// restart rewinds q to its prompt after its tools asked for a retry: the
// blocks past the last full prompt block are released (they may be in the
// prefix cache and must not be overwritten), and the rest of the prompt is
// computed again.
//
// When a windowed group has given back blocks the rewound position's
// window reaches, every block is released and the prompt starts again
// from what the prefix cache holds.
func (s *Scheduler) restart(q *seq) {
	keep := (len(q.g.Request().PromptIDs) - 1) / s.bt
	q.hashes = q.hashes[:min(len(q.hashes), keep)]
	if s.keepFrom(keep*s.bt) < q.lo {
		s.releaseBlocks(q)
		hits := s.prefixHits(q, true)
		q.computed, q.registered = hits*s.bt, hits
		return
	}
	for g, t := range q.tables {
		for _, b := range t[min(keep, len(t)):] {
			if b >= 0 {
				s.bm.release(b)
				q.held--
			}
		}
		q.tables[g] = t[:min(keep, len(t))]
	}
	q.lo = min(q.lo, keep)
	q.shared = min(q.shared, keep)
	q.registered = min(q.registered, keep)
	q.computed = keep * s.bt
}

// budgets is the next step's prefill budget (paceBudget), and the part
// of it lower classes may take: while high-priority traffic is about,
// they prefill in small chunks, so a step in flight when a high-priority
// job arrives is short (where steps cannot be interrupted it is waited
// for whole, and where they can, half of one of its layers is).
func (s *Scheduler) budgets(now time.Time, onlyHigh bool) (budget, low int) {
	budget = s.paceBudget(s.cfg.MaxBatchTokens, onlyHigh)
	low = budget
	if now.Sub(s.lastHigh) < highTrafficWindow {
		low = min(budget, max(1, s.cfg.MaxBatchTokens/8))
	}
	return budget, low
}

// paceBudget bounds a step's prefill tokens, budget at most, so that a
// step carrying decodes stays under MaxStepLatency (see pacer); a step
// without decodes keeps budget. onlyHigh: the step runs class 0 alone.
func (s *Scheduler) paceBudget(budget int, onlyHigh bool) int {
	if s.cfg.MaxStepLatency < 0 {
		return budget
	}
	// The decode rows, and where the prompts' chunks start: the furthest
	// prompt, whose chunk attends to the most.
	var decodes stepShape
	from := 0
	for _, q := range s.running {
		if onlyHigh && q.opts.Class != 0 {
			continue
		}
		if len(q.g.Tokens())-q.computed <= 1 {
			decodes.tokens++
			decodes.attended += q.computed + 1
		} else {
			from = max(from, q.computed)
		}
	}
	if decodes.tokens == 0 {
		return budget
	}
	// The floor: prompts progress at least at the decodes' pace, so that
	// under many decodes (whose step alone may take the whole bound)
	// arriving jobs do not queue for their first token ever longer.
	floor := min(max(s.cfg.MinPrefillTokens, decodes.tokens), budget)
	return s.pace.chunk(s.cfg.MaxStepLatency, decodes, from, floor, budget)
}

// planShape is the work of plan's rows, for the pacer.
func planShape(plan []stepRow) stepShape {
	var w stepShape
	for _, r := range plan {
		w.tokens += r.n
		w.attended += attendedBy(r.q.computed, r.n)
	}
	return w
}

// noteMemory records q's KV memory for its usage: the blocks it computed
// itself, and apart from them the blocks it took from the prefix cache,
// which the job that computed them counts, so that summed over jobs each
// block counts once.
func (s *Scheduler) noteMemory(q *seq) {
	sh := s.sharedHeld(q)
	q.g.NoteKVBytes(int64(q.held-sh) * s.BlockBytes())
	q.g.NoteSharedKVBytes(int64(sh) * s.BlockBytes())
}
