package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// Classes are priorities as numbers: 0 high, 1 normal, 2 low.
const numClasses = 3

// JobOpts are a job's scheduling attributes.
type JobOpts struct {
	// Tenant shares the batch fairly with other tenants of its class.
	Tenant string
	// Class is 0 (high), 1 (normal) or 2 (low).
	Class int
	// LowLatency admits the job only with its worst case reserved (the
	// banker's rule), so it is never preempted.
	LowLatency bool
	// NotPreemptible asks never to evict the job; like LowLatency it is
	// then admitted with its worst case reserved.
	NotPreemptible bool
	// MaxMemoryMB caps the job's KV memory; 0 means no cap.
	MaxMemoryMB float64
	// Temperature enters the eviction score.
	Temperature float64
	// OnEvent, if set, is told when the job is preempted or resumed
	// (kind "preempted" or "resumed"). It runs on the step loop: keep it
	// short.
	OnEvent func(kind, detail string)
}

// Stats are a job's scheduling measurements, for its usage record.
type Stats struct {
	// QueueMs is the time from submission to first admission.
	QueueMs float64
	// QueueSteps counts the forward steps run between submission and first
	// admission.
	QueueSteps int64
	// CachedInputTokens counts prompt tokens served from the prefix cache.
	CachedInputTokens int
	// Preemptions counts evictions.
	Preemptions int
	// RecomputedTokens counts tokens computed again after evictions that
	// dropped the KV blocks.
	RecomputedTokens int
}

// Scheduler runs many generations on one model at once: continuous
// batching over a paged KV cache with prefix sharing, admission by memory
// (the banker's rule for reserved jobs), preemption to a host tier or by
// recompute, strict priority classes with aging, and per-tenant fairness.
//
// One goroutine, the step loop, owns every sequence and block; Generate
// hands it a job and waits. Start, Stop as usual.
type Scheduler struct {
	cfg  Config
	m    *model.Model
	tok  *tokenizer.Tokenizer
	kv   gpu.KV
	bm   *blockManager
	bt   int // block tokens
	host struct {
		tier      gpu.HostTier // nil: no swapping
		free      []int        // free slots of tier
		cap, used int          // in blocks
	}

	submit   chan *seq
	quit     chan struct{}
	loopDone chan struct{}
	start    sync.Once
	stop     sync.Once

	// Step-loop state.
	waiting []*seq
	running []*seq
	// filler is the one job admitted with blocks for its first prefill
	// chunk only, because memory that no waiting job fits whole would
	// otherwise sit idle; it prefills from blocks nobody else needs and
	// never preempts to do so. Nil when there is none.
	filler   *seq
	lastHigh time.Time // last high-priority submission
	buf      struct {  // step buffers, reused: decode allocates nothing per step
		toks, pos, seq, rows []int32
		tables               [][]int32
		logits               []float32
		batch                gpu.Batch
	}
	served map[string]float64 // virtual token counters per tenant
	active map[string]int     // tenant → its waiting+running sequences

	// Snapshot for other goroutines.
	snapAvail   atomic.Int64
	snapWaiting atomic.Int64
	snapRunning atomic.Int64
	highPending atomic.Bool // a high-priority job is on its way to intake
	// interruptible: a step may be abandoned for a high-priority arrival
	// (a synchronous backend, and not NoInterrupt).
	interruptible   bool
	lastInterrupted bool // the last step was interrupted

	// Totals for tests, metrics and benchmarks.
	stepCount   atomic.Int64
	utilTokens  atomic.Int64 // Σ over steps of tokens held in running sequences' blocks
	utilSlots   atomic.Int64 // Σ over steps of those blocks' capacity in tokens
	occUsed     atomic.Int64 // Σ over steps with jobs waiting of the blocks in use
	occSteps    atomic.Int64 // steps with jobs waiting
	interrupted atomic.Int64 // steps abandoned for a high-priority arrival
	fillers     atomic.Int64 // jobs admitted as the filler
}

// seq is one job inside the scheduler.
type seq struct {
	g          *engine.Generation
	opts       JobOpts
	ctx        context.Context
	submitted  time.Time
	enq        time.Time // when it (re)joined the queue, for aging
	admitted   bool      // admitted at least once
	reserved   bool
	worst      int // reserved: worst-case blocks
	maxBlocks  int // 0: no cap
	computed   int // tokens whose K/V is in the cache
	highWater  int // most tokens ever computed
	blocks     []int32
	hashes     []uint64 // chain hash of each full block of tokens, computed once
	registered int      // leading blocks already offered to the prefix cache
	submitStep int64    // the step count at submission
	running    bool

	swap       []int // host tier slots holding the blocks while swapped out
	swapTokens int
	swapAt     time.Time

	stats    Stats
	err      error
	finished bool          // set by the step loop
	done     chan struct{} // closed when finished
}

// New returns a scheduler for m with a KV arena sized from cfg.
func New(m *model.Model, tok *tokenizer.Tokenizer, cfg Config) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	kvc := gpu.KVConfig{Layers: m.Layers, KVDim: m.KVDim(), BlockTokens: cfg.BlockTokens}
	blockBytes := int64(kvc.BlockFloats()) * 4
	blocks := int(int64(cfg.KVMemoryMB) << 20 / blockBytes)
	if cfg.KVBlocks > 0 {
		blocks = cfg.KVBlocks
	}
	if blocks < 2 {
		return nil, fmt.Errorf("sched: %d MB of KV memory holds %d blocks of %d bytes; give at least two", cfg.KVMemoryMB, blocks, blockBytes)
	}
	kvc.Blocks = blocks
	kv, err := m.Backend().NewKV(kvc)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, m: m, tok: tok, kv: kv, bm: newBlockManager(blocks), bt: cfg.BlockTokens,
		submit: make(chan *seq, 64), quit: make(chan struct{}), loopDone: make(chan struct{}),
		served: map[string]float64{}, active: map[string]int{}}
	if cfg.HostSwapMB > 0 {
		if n := int(int64(cfg.HostSwapMB) << 20 / blockBytes); n > 0 {
			// The backend's own tier where it has one (pinned memory and
			// asynchronous copies on a GPU).
			tier, err := gpu.NewHostTier(m.Backend(), kv, n)
			if err != nil {
				return nil, fmt.Errorf("sched: host swap tier of %d MB: %w", cfg.HostSwapMB, err)
			}
			s.host.tier, s.host.cap = tier, n
			s.host.free = make([]int, n)
			for i := range s.host.free {
				s.host.free[i] = n - 1 - i
			}
		}
	}
	if sy, ok := m.Backend().(gpu.Synchronous); ok && sy.Synchronous() && !cfg.NoInterrupt {
		s.interruptible = true
	}
	s.publishSnapshot()
	return s, nil
}

// Start starts the step loop.
func (s *Scheduler) Start() {
	s.start.Do(func() { go s.loop() })
}

// Stop ends the step loop; running and waiting jobs finish with
// ErrStopped. It is safe to call twice.
func (s *Scheduler) Stop() {
	s.stop.Do(func() { close(s.quit) })
	s.Start() // a scheduler never started still closes its loop
	<-s.loopDone
}

// BlockBytes is the size of one KV block.
func (s *Scheduler) BlockBytes() int64 { return int64(s.kv.Config().BlockFloats()) * 4 }

// Blocks is the number of blocks in the arena.
func (s *Scheduler) Blocks() int { return s.kv.Config().Blocks }

func (s *Scheduler) blocksFor(tokens int) int { return (tokens + s.bt - 1) / s.bt }

// Generate runs one request and returns its result. It blocks until the
// job finishes, is canceled through ctx (StopCanceled), or fails.
func (s *Scheduler) Generate(ctx context.Context, req *engine.Request, opts JobOpts) (_ *engine.Result, _ Stats, err error) {
	g, err := engine.NewGeneration(s.m, s.tok, req)
	if err != nil {
		return nil, Stats{}, err
	}
	defer func() {
		if m := s.cfg.Metrics; m != nil && errors.Is(err, ErrTooLarge) {
			m.rejections.Inc()
		}
	}()
	if opts.Class < 0 || opts.Class >= numClasses {
		return nil, Stats{}, fmt.Errorf("sched: class %d outside [0,%d)", opts.Class, numClasses)
	}
	q := &seq{g: g, opts: opts, ctx: ctx, submitted: time.Now(), done: make(chan struct{})}
	q.enq = q.submitted
	q.submitStep = s.stepCount.Load()
	prompt := len(req.PromptIDs)
	if opts.MaxMemoryMB > 0 {
		q.maxBlocks = int(opts.MaxMemoryMB * (1 << 20) / float64(s.BlockBytes()))
		if s.blocksFor(prompt+1) > q.maxBlocks {
			return nil, Stats{}, fmt.Errorf("%w: the prompt of %d tokens needs %d KV blocks of %d bytes; max_memory_mb %.1f allows %d",
				ErrTooLarge, prompt, s.blocksFor(prompt+1), s.BlockBytes(), opts.MaxMemoryMB, q.maxBlocks)
		}
	}
	q.reserved = opts.LowLatency || opts.NotPreemptible || (opts.Class == 0 && s.cfg.ReserveHighPriority)
	if q.reserved {
		q.worst = s.blocksFor(prompt + g.MaxNew())
		if q.maxBlocks > 0 {
			q.worst = min(q.worst, q.maxBlocks)
		}
	}
	need := s.blocksFor(prompt + 1)
	if q.reserved {
		need = q.worst
	}
	if need > s.Blocks() {
		return nil, Stats{}, fmt.Errorf("%w: the job needs %d KV blocks, the arena has %d", ErrTooLarge, need, s.Blocks())
	}
	if opts.Class == 0 {
		// Before the send: a step in flight without high-priority rows
		// stops at its next layer (see step), and intake clears the flag
		// once it has the job.
		s.highPending.Store(true)
	}
	select {
	case s.submit <- q:
	case <-s.quit:
		return nil, Stats{}, ErrStopped
	}
	<-q.done
	if q.err != nil {
		return nil, q.stats, q.err
	}
	return q.g.Result(), q.stats, nil
}

// Utilization reports, over the steps run so far: fill, the fraction of
// the running sequences' block capacity holding tokens (1 − internal
// fragmentation); occupancy, the fraction of the arena's blocks in use
// during steps when jobs were waiting for memory or a slot (how fully
// admission packs the arena under load); and the number of steps.
func (s *Scheduler) Utilization() (fill, occupancy float64, steps int64) {
	if slots := s.utilSlots.Load(); slots > 0 {
		fill = float64(s.utilTokens.Load()) / float64(slots)
	}
	if n := s.occSteps.Load(); n > 0 {
		occupancy = float64(s.occUsed.Load()) / float64(n*int64(s.bm.n))
	}
	return fill, occupancy, s.stepCount.Load()
}

// CanAdmit reports whether a job of class with a prompt of up to
// promptTokens would be admitted soon: the intake pulls only such jobs, so
// work stays in JetStream for workers with room (memory-aware load
// balancing by pulling).
func (s *Scheduler) CanAdmit(class, promptTokens int) bool {
	if s.snapWaiting.Load() >= 2 || s.snapRunning.Load() >= int64(s.cfg.MaxRunning) {
		return false
	}
	return int64(s.blocksFor(min(promptTokens, s.m.Context)+1)) <= s.snapAvail.Load()
}

func (s *Scheduler) publishSnapshot() {
	s.snapAvail.Store(int64(s.bm.available() - s.committed()))
	s.snapWaiting.Store(int64(len(s.waiting)))
	s.snapRunning.Store(int64(len(s.running)))
}

// loop is the step loop.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	defer s.shutdown()
	for {
		idle := len(s.running) == 0 && len(s.waiting) == 0
		if !s.intake(idle) {
			return
		}
		now := time.Now()
		s.reap()
		s.gcSwap(now)
		s.admit(now)
		if len(s.running) > 0 {
			s.step()
		} else if len(s.waiting) > 0 {
			// Nothing admissible and nothing running: wait briefly for a
			// cancel or a new job rather than spin.
			select {
			case q := <-s.submit:
				s.enqueue(q)
			case <-time.After(10 * time.Millisecond):
			case <-s.quit:
				return
			}
		}
		s.publishSnapshot()
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.observe(s)
		}
	}
}

// intake moves submitted jobs into the waiting queue, blocking when idle.
// It returns false when the scheduler stops.
func (s *Scheduler) intake(block bool) bool {
	if block {
		select {
		case q := <-s.submit:
			s.enqueue(q)
		case <-s.quit:
			return false
		}
	}
	for {
		select {
		case q := <-s.submit:
			s.enqueue(q)
		case <-s.quit:
			return false
		default:
			return true
		}
	}
}

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

// shutdown fails every job still held.
func (s *Scheduler) shutdown() {
	for {
		select {
		case q := <-s.submit:
			s.waiting = append(s.waiting, q)
			continue
		default:
		}
		break
	}
	for _, q := range append(append([]*seq(nil), s.running...), s.waiting...) {
		s.finish(q, "", ErrStopped)
	}
}

// reap ends canceled jobs, waiting or running.
func (s *Scheduler) reap() {
	for _, q := range append(append([]*seq(nil), s.waiting...), s.running...) {
		if q.ctx.Err() != nil {
			s.finish(q, engine.StopCanceled, nil)
		}
	}
}

// finish ends q: its blocks and host copies are released and Generate
// returns.
func (s *Scheduler) finish(q *seq, reason string, err error) {
	if q.finished {
		return
	}
	q.finished = true
	s.releaseBlocks(q)
	if s.filler == q {
		s.filler = nil
	}
	s.dropSwap(q)
	s.running = slices.DeleteFunc(s.running, func(x *seq) bool { return x == q })
	s.waiting = slices.DeleteFunc(s.waiting, func(x *seq) bool { return x == q })
	q.running = false
	s.active[q.opts.Tenant]--
	if reason != "" {
		q.g.Finish(reason)
	}
	q.err = err
	close(q.done)
}

func (s *Scheduler) releaseBlocks(q *seq) {
	for _, b := range q.blocks {
		s.bm.release(b)
	}
	q.blocks = q.blocks[:0]
}

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

// reservedOutstanding is what reserved running jobs may still allocate.
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

// hashAt returns the chain hash of q's full block i (its tokens never
// change, so the chain is computed once).
func (s *Scheduler) hashAt(q *seq, i int) uint64 {
	toks := q.g.Tokens()
	for len(q.hashes) <= i {
		j := len(q.hashes)
		var prev uint64
		if j > 0 {
			prev = q.hashes[j-1]
		}
		q.hashes = append(q.hashes, s.bm.chainHash(prev, toks[j*s.bt:(j+1)*s.bt]))
	}
	return q.hashes[i]
}

// prefixHits counts the leading full blocks of q's tokens in the prefix
// cache, leaving at least one token to compute. With take set it also takes
// them into q.blocks.
func (s *Scheduler) prefixHits(q *seq, take bool) int {
	if s.cfg.DisablePrefixCache {
		return 0
	}
	toks := q.g.Tokens()
	hits := 0
	for i := 0; (i+1)*s.bt <= len(toks)-1; i++ {
		h := s.hashAt(q, i)
		if !take {
			if _, ok := s.bm.cache[h]; !ok {
				break
			}
		} else {
			b, ok := s.bm.lookup(h)
			if !ok {
				break
			}
			q.blocks = append(q.blocks, b)
		}
		hits++
	}
	return hits
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

func (s *Scheduler) event(q *seq, kind, detail string) {
	if q.opts.OnEvent != nil {
		q.opts.OnEvent(kind, detail)
	}
}

// grow gives q the blocks for need positions' worth of blocks, preempting
// others (or q itself) when memory runs short. It reports whether q is
// still running.
func (s *Scheduler) grow(q *seq, need int, now time.Time) bool {
	for len(q.blocks) < need {
		if !q.reserved && s.bm.available()-s.reservedOutstanding() <= 0 {
			vs := s.victimOrder(nil)
			if len(vs) == 0 || vs[0] == q {
				s.preempt(q, now, "KV memory ran short")
				return false
			}
			s.preempt(vs[0], now, "KV memory ran short")
			continue
		}
		b, ok := s.bm.alloc()
		if !ok {
			// Only a reserved job can get here, and the banker's rule
			// guarantees its blocks.
			panic("sched: KV arena exhausted under a reservation")
		}
		q.blocks = append(q.blocks, b)
	}
	q.g.NoteKVBytes(int64(len(q.blocks)) * s.BlockBytes())
	return true
}

// highTrafficWindow is how long after a high-priority submission lower
// classes prefill in small chunks.
const highTrafficWindow = 10 * time.Second

// stepRow is one sequence's share of a step.
type stepRow struct {
	q       *seq
	n       int  // tokens fed
	samples bool // the row reaches the end of q's tokens: it samples
}

// step runs one forward pass: a decode token for every running sequence
// and prefill chunks within MaxBatchTokens.
func (s *Scheduler) step() {
	now := time.Now()
	budget := s.cfg.MaxBatchTokens
	// A high-priority job waiting for its first token gets a step of its
	// class alone: lower classes skip one step rather than lengthen the
	// high-priority job's time to first token.
	onlyHigh := false
	for _, q := range s.running {
		if q.opts.Class == 0 && len(q.g.Result().OutputIDs) == 0 && !q.g.Done() {
			onlyHigh = true
			break
		}
	}
	// While high-priority traffic is about, lower classes prefill in
	// small chunks, so a step in flight when a high-priority job arrives
	// is short: where steps cannot be interrupted it is waited for whole,
	// and where they can, one of its layers is.
	lowBudget := budget
	if now.Sub(s.lastHigh) < highTrafficWindow {
		lowBudget = max(1, s.cfg.MaxBatchTokens/8)
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
		if rem > 1 {
			n = min(rem, budget)
			if q == s.filler {
				// Only blocks beyond the others' headroom; no preemption.
				free := max(0, s.bm.available()-s.committed()-s.growingSoon())
				n = min(n, (len(q.blocks)+free)*s.bt-q.computed)
			}
			if n <= 0 {
				continue
			}
		} else if q == s.filler {
			s.filler = nil // prefilled: an ordinary job from now on
		}
		need := s.blocksFor(q.computed + n)
		if q.maxBlocks > 0 && need > q.maxBlocks {
			s.finish(q, engine.StopMemoryLimit, nil)
			continue
		}
		if !s.grow(q, need, now) {
			continue
		}
		if rem > 1 {
			budget -= n
		}
		plan = append(plan, stepRow{q, n, q.computed+n == len(toks)})
	}
	// A sequence planned early may have been preempted by a later one's
	// growth: drop it from this step.
	plan = slices.DeleteFunc(plan, func(r stepRow) bool { return !r.q.running })
	if len(plan) == 0 {
		return
	}
	// Step buffers are reused: the decode path allocates nothing per step.
	toks, pos, seqIdx, rows := s.buf.toks[:0], s.buf.pos[:0], s.buf.seq[:0], s.buf.rows[:0]
	tables := s.buf.tables[:0]
	for i, r := range plan {
		all := r.q.g.Tokens()
		for j := 0; j < r.n; j++ {
			toks = append(toks, all[r.q.computed+j])
			pos = append(pos, int32(r.q.computed+j))
			seqIdx = append(seqIdx, int32(i))
		}
		tables = append(tables, r.q.blocks)
		if r.samples {
			rows = append(rows, int32(len(toks)-1))
		}
	}
	s.buf.toks, s.buf.pos, s.buf.seq, s.buf.rows, s.buf.tables = toks, pos, seqIdx, rows, tables
	if need := len(rows) * s.m.Vocab; cap(s.buf.logits) < need {
		s.buf.logits = make([]float32, need)
	}
	logits := s.buf.logits[:len(rows)*s.m.Vocab]
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
	// A step without high-priority rows gives way to a high-priority job
	// that arrives while it runs: it stops at the next layer and is run
	// again, with the new job, after admission. Nothing is lost but the
	// layers already done (the rerun writes the same K and V). Taking the
	// flag means one arrival stops at most one step, and a step right
	// after an interrupted one always completes, so arrivals faster than
	// steps cannot starve the rest.
	var stop func() bool
	if s.interruptible && !s.lastInterrupted && !slices.ContainsFunc(plan, func(r stepRow) bool { return r.q.opts.Class == 0 }) {
		stop = func() bool { return s.highPending.Swap(false) }
	}
	s.buf.batch = gpu.Batch{Pos: pos, Seq: seqIdx, Tables: tables}
	err := s.m.ForwardInterruptible(s.kv, toks, &s.buf.batch, rows, logits, stop)
	masks.Wait()
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
	var held, slots int64
	for _, q := range s.running {
		held += int64(q.computed)
		slots += int64(len(q.blocks) * s.bt)
	}
	s.utilTokens.Add(held)
	s.utilSlots.Add(slots)
	if len(s.waiting) > 0 {
		s.occUsed.Add(int64(s.bm.used()))
		s.occSteps.Add(1)
	}
	done := time.Now()
	li := 0
	for _, r := range plan {
		q := r.q
		q.computed += r.n
		q.highWater = max(q.highWater, q.computed)
		s.served[q.opts.Tenant] += float64(r.n)
		s.registerFull(q)
		if !r.samples {
			continue // prefill chunk: no logits yet
		}
		l := logits[li*s.m.Vocab : (li+1)*s.m.Vocab]
		li++
		if _, ok := q.g.Observe(l, done); !ok {
			if q.g.Done() {
				s.finish(q, "", nil)
			} else {
				s.restart(q)
			}
		}
	}
	if m := s.cfg.Metrics; m != nil {
		m.stepTokens.Observe(float64(len(toks)))
	}
}

// restart rewinds q to its prompt after its tools asked for a retry: the
// blocks past the last full prompt block are released (they may be in the
// prefix cache and must not be overwritten), and the rest of the prompt is
// computed again.
func (s *Scheduler) restart(q *seq) {
	keep := (len(q.g.Request().PromptIDs) - 1) / s.bt
	for _, b := range q.blocks[keep:] {
		s.bm.release(b)
	}
	q.blocks = q.blocks[:keep]
	q.hashes = q.hashes[:min(len(q.hashes), keep)]
	q.registered = min(q.registered, keep)
	q.computed = keep * s.bt
}

// registerFull puts q's newly completed blocks in the prefix cache.
func (s *Scheduler) registerFull(q *seq) {
	if s.cfg.DisablePrefixCache {
		return
	}
	full := min(q.computed/s.bt, len(q.blocks))
	for i := q.registered; i < full; i++ {
		s.bm.register(q.blocks[i], s.hashAt(q, i))
	}
	q.registered = max(q.registered, full)
}
