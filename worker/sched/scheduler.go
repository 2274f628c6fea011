package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	// Weight is the tenant's share of its class against the other
	// tenants' (its running sequences and tokens served are counted
	// divided by it). Zero means 1.
	Weight float64
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
	// FirstTokenSteps counts the forward steps from first admission to the
	// first output token, the step that produced it included.
	FirstTokenSteps int64
	// CachedInputTokens counts prompt tokens served from the prefix cache.
	CachedInputTokens int
	// Preemptions counts evictions.
	Preemptions int
	// RecomputedTokens counts tokens computed again after evictions that
	// dropped the KV blocks.
	RecomputedTokens int
	// Reserved is set when the job was admitted with its worst case
	// reserved (low_latency, not preemptible, or high priority with
	// Config.ReserveHighPriority): it is never preempted.
	Reserved bool
	// SampleSteps counts the forward passes that sampled the job's
	// tokens: its output tokens over it is the tokens a pass emitted
	// (more than 1 with accepted drafts).
	SampleSteps int
	// DraftedTokens counts the draft tokens verified (draft.go), and
	// AcceptedDraftTokens those the model agreed with (they were emitted
	// without a pass of their own).
	DraftedTokens, AcceptedDraftTokens int
	// KVBytes is, for an embedding job (Embed), the KV bytes its inputs
	// held at their last positions, summed.
	KVBytes int64
}

// Scheduler runs many generations on one model at once: continuous
// batching over a paged KV cache with prefix sharing, admission by memory
// (the banker's rule for reserved jobs), preemption to a host tier or by
// recompute, strict priority classes with aging, and per-tenant fairness.
//
// One goroutine, the step loop, owns every sequence and block; Generate
// hands it a job and waits. Start and Stop bound the loop's life.
type Scheduler struct {
	cfg  Config
	m    *model.Model
	tok  *tokenizer.Tokenizer
	kv   gpu.KV
	bm   *blockManager
	bt   int   // block tokens
	pg   pages // how sequences hold blocks: one table per layer group
	host struct {
		tier      gpu.HostTier // nil: no swapping
		free      []int        // free slots of tier
		cap, used int          // in blocks
	}
	// arena is the KV arena's size and why (KVArena).
	arena engine.KVArena

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
		tables               [][][]int32 // [group][row]
		logits               []float32
		claims               []claim
		peakEvents           []peakEvent
		batches              []gpu.Batch    // one per group
		hit                  []int32        // prefixHits: last windowed miss at or before each block
		tenantTokens         map[string]int // output tokens per tenant this step
		hrows                []int32        // rows whose final hidden state an embedding input needs
		hidden               []float32      // their states
		allHidden            []float32      // an encoder's step: every row's state
		observe              []observation  // the step's sampling rows
		// tenantCounters are Metrics' per-tenant token counters, looked
		// up once each (the label lookup hashes on every call).
		tenantCounters map[string]prometheus.Counter
	}
	served map[string]float64 // virtual token counters per tenant: tokens ÷ weight
	active map[string]int     // tenant → its waiting+running sequences
	// fresh counts jobs handed to Generate and never admitted yet (not
	// those waiting again after a preemption), per class and tenant: the
	// look-ahead Room keeps.
	fresh freshJobs

	// Snapshot for other goroutines.
	snapAvail   atomic.Int64
	snapRunning atomic.Int64
	// Per class c: jobs of class c waiting, and the blocks (and number)
	// of running preemptible jobs of a lower class than c, which a job
	// of class c can take by preemption.
	snapWaitingClass [numClasses]atomic.Int64
	snapBelowBlocks  [numClasses]atomic.Int64
	snapBelowJobs    [numClasses]atomic.Int64
	// sent counts, per class, jobs handed to Generate that no published
	// snapshot counts yet (the loop subtracts them when it publishes one
	// that does): Room adds them, so the intake cannot pull a whole
	// backlog in the time between two snapshots (a step can take a second
	// on a CPU). enqueued is the loop's count of jobs taken since the last
	// snapshot.
	sent          [numClasses]atomic.Int64
	enqueued      [numClasses]int64
	urgentPending atomic.Bool // a high-priority or low_latency job is on its way to intake
	// interruptible: a step may be abandoned for a high-priority arrival
	// (a synchronous backend, and not NoInterrupt).
	interruptible   bool
	lastInterrupted bool // the last step was interrupted
	// hostFor runs a step's sampling rows on the backend's threads where
	// they are the host's (gpu.HostParallel); nil: on goroutines.
	hostFor func(n int, fn func(lo, hi int))

	// watchers are told when the scheduler may take more work
	// (OnCapacity).
	watchMu  sync.Mutex
	watchers []func()
	// freshTaken is set (on the step loop) when a job handed to Generate
	// stops being fresh (admitted, or ended before it was): Room's
	// per-tenant look-ahead may have opened although the totals it
	// also reads did not change (a fresh job admitted in place of one
	// it preempted), so the watchers are told at the next snapshot.
	freshTaken bool

	// stepTokens, if set (by tests, before Start), is told after each
	// completed step how many output tokens each tenant got in it (the
	// map is reused: valid during the call only).
	stepTokens func(map[string]int)

	// Totals for tests, metrics and benchmarks.
	stepCount   atomic.Int64
	utilTokens  atomic.Int64 // Σ over steps of tokens held in running sequences' blocks
	utilSlots   atomic.Int64 // Σ over steps of those blocks' capacity in tokens
	occUsed     atomic.Int64 // Σ over steps with jobs waiting for memory or a slot of the blocks in use
	occSteps    atomic.Int64 // steps with jobs waiting for memory or a slot
	occPromised atomic.Int64 // Σ over those steps of the free blocks promised to admitted prompts
	occSoon     atomic.Int64 // Σ over those steps of the free blocks kept for running jobs' growth
	// waitSteps counts the steps with jobs waiting by what held them
	// (heldWhy), the first reason of heldMemory, heldSlots, heldCompute,
	// heldPrefix a step saw.
	waitSteps [numHeld]atomic.Int64
	// held is what kept waiting jobs out at this step's admission.
	held        heldWhy
	mostInStep  atomic.Int64 // the most sequences one completed step ran
	interrupted atomic.Int64 // steps abandoned for a high-priority arrival
	fillers     atomic.Int64 // jobs admitted as the filler
	noProgress  atomic.Int64 // evictions of a resumed job that had generated nothing since
	attaches    atomic.Int64 // jobs that waited for another sequence computing their prompt's blocks
	duplicated  atomic.Int64 // prompt tokens computed in blocks another sequence computed too
	paced       atomic.Int64 // steps whose prefill budget MaxStepLatency cut
	// reservedWaits counts the steps a reserved job sat out because the
	// block it needed was kept for another reserved job to finish.
	reservedWaits atomic.Int64

	// pace sizes prefill chunks beside decodes from measured step times
	// (MaxStepLatency).
	pace pacer

	// Admission look-ahead (preempt.go: pressure, calm): admission keeps
	// room for every running job's next horizon tokens.
	horizon   int
	calmSteps int
	pressed   bool // evicted for memory this step
}

// seq is one job inside the scheduler.
type seq struct {
	g         *engine.Generation
	opts      JobOpts
	ctx       context.Context
	submitted time.Time
	enq       time.Time // when it (re)joined the queue, for aging
	admitted  bool      // admitted at least once
	reserved  bool
	worst     int // reserved: worst-case blocks
	maxBlocks int // 0: no cap
	computed  int // tokens whose K/V is in the cache
	highWater int // most tokens ever computed
	// tables holds a block table per layer group (pages): the blocks of
	// each logical block of positions, −1 where a windowed group gave
	// one back (those before lo). held counts the blocks held.
	tables     [][]int32
	lo         int
	held       int
	hashes     []uint64 // chain hash of each full block of tokens, computed once
	registered int      // leading logical blocks already offered to the prefix cache
	shared     int      // leading logical blocks taken from the prefix cache (computed by another job)
	attached   bool     // has waited for a running sequence computing its prompt's blocks
	submitStep int64    // the step count at submission
	admitStep  int64    // the step count at first admission
	running    bool

	swap       []int // host tier slots holding the blocks while swapped out
	swapTokens int
	swapLo     int // q.lo when swapped out
	swapL      int // logical blocks when swapped out
	swapAt     time.Time
	// resumeOut is the output length when q last resumed; protectUntil
	// the output length that ends its run quantum.
	resumeOut, protectUntil int
	// wholeSpan is set once q has been evicted because the arena ran
	// short: admission's look-ahead was too short for it, so from then on
	// its span is its whole generation (span), kept free for it on
	// admission and while it runs, and it is evicted for memory again only
	// when no other ordinary job of its class can go.
	wholeSpan bool
	// dr drafts tokens for verification (draft.go); nil: no drafts.
	dr *drafter
	// emb is set for an embedding input (embed.go): its rows' hidden
	// states are pooled and nothing is sampled.
	emb *embedSeq

	stats    Stats
	err      error
	finished bool          // set by the step loop
	done     chan struct{} // closed when finished
}

// arenaLayout is how cfg's arena holds m's layers (Config.WholeBlocks).
func arenaLayout(m *model.Model, cfg Config) model.KVLayout {
	if cfg.WholeBlocks {
		return m.WholeKVLayout()
	}
	return m.KVLayout()
}

// ArenaConfig is the shape of the arena New makes for m with cfg, its
// Blocks left 0: what a gpu.KVSizer sizes (cfg.KVBlocks) before New.
func ArenaConfig(m *model.Model, cfg Config) gpu.KVConfig {
	return m.KVConfig(arenaLayout(m, cfg), 0, cfg.WithDefaults().BlockTokens)
}

// New returns a scheduler for m with a KV arena sized from cfg.
func New(m *model.Model, tok *tokenizer.Tokenizer, cfg Config) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	layout := arenaLayout(m, cfg)
	kvc := m.KVConfig(layout, 0, cfg.BlockTokens)
	blockBytes := kvc.BlockBytes()
	pg := newPages(layout, cfg.BlockTokens, cfg.MaxBatchTokens)
	// A sequence of the model's whole context holds full blocks.
	full := (&Scheduler{pg: pg, bt: cfg.BlockTokens}).pagesAt(m.Context, true)
	var arena engine.KVArena
	switch {
	case cfg.KVBlocks > 0:
		arena = engine.ConfiguredKVArena(cfg.KVBlocks, blockBytes, full, m.Context)
	case cfg.KVMemoryMB > 0:
		arena = engine.ConfiguredKVArena(int(int64(cfg.KVMemoryMB)<<20/blockBytes), blockBytes, full, m.Context)
	default:
		// As llama.cpp sizes its context: from the model's, within the
		// machine's memory.
		arena = engine.DefaultKVArena(blockBytes, full, m.Context, engine.ReadMemory())
	}
	blocks := arena.Blocks
	if blocks < 2 {
		return nil, fmt.Errorf("sched: %d MB of KV memory holds %d blocks of %d bytes; give at least two", cfg.KVMemoryMB, blocks, blockBytes)
	}
	kvc.Blocks = blocks
	kv, err := m.Backend().NewKV(kvc)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, m: m, tok: tok, kv: kv, bm: newBlockManager(blocks), bt: cfg.BlockTokens, arena: arena,
		pg:     pg,
		submit: make(chan *seq, 64), quit: make(chan struct{}), loopDone: make(chan struct{}),
		served: map[string]float64{}, active: map[string]int{}}
	if cfg.KVBlocks == 0 && cfg.KVMemoryMB == 0 {
		cfg.Logger.Info("sched: "+arena.String(), "blocks", blocks, "block_bytes", blockBytes, "kv_type", kvc.Type.String())
	}
	s.horizon = cfg.RunQuantum
	if cfg.HostSwapMB > 0 {
		n := int(int64(cfg.HostSwapMB) << 20 / blockBytes)
		if cfg.HostSwapBlocks > 0 {
			n = cfg.HostSwapBlocks
		}
		if n > 0 {
			// The backend's own tier where it has one (pinned memory and
			// asynchronous copies on a GPU).
			tier, err := gpu.NewHostTier(m.Backend(), kv, n)
			if err != nil {
				return nil, fmt.Errorf("sched: host swap tier of %d MB: %w", cfg.HostSwapMB, err)
			}
			s.host.tier, s.host.cap = tier, n
			// A stack: slots given back are reused first, and fresh ones
			// come in order (0, 1, …), the prefix a memory tier commits
			// ahead of use (gpu.NewHostTier).
			s.host.free = make([]int, n)
			for i := range s.host.free {
				s.host.free[i] = n - 1 - i
			}
		}
	}
	if sy, ok := m.Backend().(gpu.Synchronous); ok && sy.Synchronous() && !cfg.NoInterrupt {
		s.interruptible = true
	}
	if hp, ok := m.Backend().(gpu.HostParallel); ok {
		s.hostFor = hp.HostFor
	}
	if bi, ok := m.Backend().(gpu.BatchInvariant); !s.cfg.NoDrafts && (!ok || !bi.BatchInvariant()) {
		// A verified row would be computed otherwise than alone, and
		// might not give the token decoding without drafts gives.
		s.cfg.NoDrafts = true
		s.cfg.Logger.Info("sched: drafts off: the backend does not give a row the same results in any batch")
	}
	s.publishSnapshot()
	return s, nil
}

// Start starts the step loop, which runs until Stop: ctx is not kept, so
// its end does not stop the loop. It returns ctx.Err() without starting
// when ctx is already done. Starting a started or stopped scheduler does
// nothing.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.start.Do(func() { go s.loop() })
	return nil
}

// Stop ends the step loop once its step in flight is done; running and
// waiting jobs finish with ErrStopped. It waits for the loop to end, or
// for ctx, returning ctx.Err() (the loop still ends on its own). Stopping
// a stopped scheduler does nothing; a scheduler never started stops too.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.stop.Do(func() { close(s.quit) })
	s.start.Do(func() { go s.loop() }) // a scheduler never started still closes its loop
	select {
	case <-s.loopDone:
		return nil
	default:
	}
	select {
	case <-s.loopDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BlockBytes is the size of one KV block: one layer group's K and V for
// BlockTokens positions (model.KVLayout; every layer without windows).
func (s *Scheduler) BlockBytes() int64 { return s.kv.Config().BlockBytes() }

// Blocks is the number of blocks in the arena.
func (s *Scheduler) Blocks() int { return s.kv.Config().Blocks }

// KVArena is the arena's size and how it was chosen: by Config, or, when
// it sets neither KVMemoryMB nor KVBlocks, by engine.DefaultKVArena from
// the model's context and the machine's memory. Its String is for logs.
func (s *Scheduler) KVArena() engine.KVArena { return s.arena }

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
	q, err := s.newSeq(ctx, g, opts, !s.cfg.NoDrafts && !req.NoDrafts)
	if err != nil {
		return nil, Stats{}, err
	}
	if err := s.send(q); err != nil {
		return nil, Stats{}, err
	}
	if err := s.await(q); err != nil {
		return nil, q.stats, err
	}
	return q.g.Result(), q.stats, nil
}

// newSeq checks a job's options and memory against the arena and makes
// its sequence.
func (s *Scheduler) newSeq(ctx context.Context, g *engine.Generation, opts JobOpts, drafts bool) (*seq, error) {
	if opts.Class < 0 || opts.Class >= numClasses {
		return nil, fmt.Errorf("sched: class %d outside [0,%d)", opts.Class, numClasses)
	}
	if !(opts.Weight >= 0) || math.IsInf(opts.Weight, 1) {
		return nil, fmt.Errorf("sched: tenant weight %v: must be a positive number (0 means 1)", opts.Weight)
	}
	if opts.Weight == 0 {
		opts.Weight = 1
	}
	q := &seq{g: g, opts: opts, ctx: ctx, submitted: time.Now(), done: make(chan struct{}), tables: make([][]int32, s.pg.groups)}
	q.enq = q.submitted
	q.submitStep = s.stepCount.Load()
	if drafts {
		q.dr = newDrafter()
	}
	prompt := len(g.Request().PromptIDs)
	if opts.MaxMemoryMB > 0 {
		q.maxBlocks = int(opts.MaxMemoryMB * (1 << 20) / float64(s.BlockBytes()))
		if s.pagesAt(prompt+1, true) > q.maxBlocks {
			return nil, fmt.Errorf("%w: the prompt of %d tokens needs %d KV blocks of %d bytes; max_memory_mb %.1f allows %d",
				ErrTooLarge, prompt, s.pagesAt(prompt+1, true), s.BlockBytes(), opts.MaxMemoryMB, q.maxBlocks)
		}
	}
	q.reserved = opts.LowLatency || opts.NotPreemptible || (opts.Class == 0 && s.cfg.ReserveHighPriority)
	if q.reserved {
		q.worst = s.pagesAt(prompt+g.MaxNew(), true)
		if q.maxBlocks > 0 && q.worst > q.maxBlocks {
			// The banker's rule: a reserved job is admitted only if it
			// can finish, and under its cap it cannot.
			return nil, fmt.Errorf("%w: a reserved (low_latency or not preemptible) job's worst case of %d prompt and %d new tokens needs %d KV blocks of %d bytes; max_memory_mb %.1f allows %d: lower max_tokens or raise max_memory_mb",
				ErrTooLarge, prompt, g.MaxNew(), q.worst, s.BlockBytes(), opts.MaxMemoryMB, q.maxBlocks)
		}
	}
	need := s.pagesAt(prompt+1, true)
	if q.reserved {
		need = q.worst
	}
	if need > s.Blocks() {
		return nil, fmt.Errorf("%w: the job needs %d KV blocks of %d bytes, %d tokens; the worker's KV arena has %d blocks (%d MB): shorten the prompt, or serve the model with more KV memory (--kv-memory-mb)",
			ErrTooLarge, need, s.BlockBytes(), prompt, s.Blocks(), (int64(s.Blocks())*s.BlockBytes())>>20)
	}
	if q.maxBlocks == 0 || q.maxBlocks > s.Blocks() {
		// The arena is every job's cap: a generation that would outgrow
		// it alone stops with memory_limit, where it would otherwise
		// evict itself at its next block, come back, and do it again.
		q.maxBlocks = s.Blocks()
	}
	return q, nil
}

// send hands q to the step loop.
func (s *Scheduler) send(q *seq) error {
	opts := q.opts
	if opts.Class == 0 || opts.LowLatency {
		// Before the send: a step in flight without a high-priority prompt
		// stops within half a layer (see step), and intake clears the flag
		// once it has the job. A low_latency job's queue time is then
		// the same under load as idle: it is admitted (by its reserved
		// path) after half a layer, not after a whole step.
		s.urgentPending.Store(true)
	}
	s.sent[opts.Class].Add(1)
	s.fresh.add(opts.Class, opts.Tenant, 1)
	select {
	case s.submit <- q:
		return nil
	case <-s.quit:
		s.sent[opts.Class].Add(-1)
		s.fresh.add(opts.Class, opts.Tenant, -1)
		return ErrStopped
	}
}

// await waits for the step loop to finish q and returns its error.
func (s *Scheduler) await(q *seq) error {
	// The send can land in the buffer after a stopping loop has drained
	// it; the loop answers every job it took before it ends, so a job
	// unanswered when the loop has ended was never taken.
	select {
	case <-q.done:
	case <-s.loopDone:
		select {
		case <-q.done:
		default:
			return ErrStopped
		}
	}
	return q.err
}

// Utilization reports, over the steps run so far: fill, the fraction of
// the running sequences' block capacity holding tokens (1 − internal
// fragmentation); occupancy, the fraction of the arena's blocks in use
// during steps when jobs were waiting for memory or a slot (how fully
// admission packs the arena when memory is what it rations; steps when
// jobs waited only for the prefill budget do not count: see WaitSteps);
// and the number of steps.
func (s *Scheduler) Utilization() (fill, occupancy float64, steps int64) {
	if slots := s.utilSlots.Load(); slots > 0 {
		fill = float64(s.utilTokens.Load()) / float64(slots)
	}
	if n := s.occSteps.Load(); n > 0 {
		occupancy = float64(s.occUsed.Load()) / float64(n*int64(s.bm.n))
	}
	return fill, occupancy, s.stepCount.Load()
}

// WaitSteps counts the steps run while jobs waited, by what first held
// them out at admission (memory before slots before compute before
// prefix): Memory, the arena beside what admission had promised; Slots,
// MaxRunning; Compute, the step's prefill budget, taken by prompts
// admitted before them; Prefix, another job computing their prompt's
// blocks. Utilization's occupancy is over the Memory and Slots steps.
type WaitSteps struct{ Memory, Slots, Compute, Prefix int64 }

// WaitSteps reports the steps run so far while jobs waited, by reason.
func (s *Scheduler) WaitSteps() WaitSteps {
	return WaitSteps{s.waitSteps[0].Load(), s.waitSteps[1].Load(), s.waitSteps[2].Load(), s.waitSteps[3].Load()}
}

// ArenaShares divides the arena's blocks, averaged over the steps run
// while jobs waited for memory or a slot: InUse, holding sequences' KV;
// Promised, free but promised to admitted jobs' prompts (and to reserved
// jobs' peak); Growth, free but kept for the running jobs' next horizon
// tokens; Free, the rest. Steps is the number of such steps.
type ArenaShares struct {
	InUse, Promised, Growth, Free float64
	Steps                         int64
}

// ArenaWhileWaiting reports how the arena was taken while jobs waited for
// memory or a slot: what occupancy (Utilization) leaves out.
func (s *Scheduler) ArenaWhileWaiting() ArenaShares {
	a := ArenaShares{Steps: s.occSteps.Load()}
	if a.Steps > 0 {
		d := float64(a.Steps * int64(s.bm.n))
		a.InUse = float64(s.occUsed.Load()) / d
		a.Promised = float64(s.occPromised.Load()) / d
		a.Growth = float64(s.occSoon.Load()) / d
		a.Free = max(0, 1-a.InUse-a.Promised-a.Growth)
	}
	return a
}

// MostInStep is the most sequences one step has run (decoding or
// prefilling), a measure of how many jobs the arena held at once.
func (s *Scheduler) MostInStep() int { return int(s.mostInStep.Load()) }

// LookAhead is how many jobs of one class the intake keeps waiting in the
// scheduler beyond what the next step can start (Room): enough that
// admission, not the pull order, picks the next job, and few enough that
// work stays in JetStream for other workers. Jobs waiting again after a
// preemption do not count: they are the scheduler's own, not a choice.
const LookAhead = 2

// LookAheadTenants bounds, per class, the jobs the look-ahead holds when
// each tenant may have one job of its own there: admission then chooses
// between tenants (the least served first, preempting a tenant over its
// share: see fairShare.victim), not the pull order, even while one tenant's
// jobs fill LookAhead.
const LookAheadTenants = 8

// Room is how many jobs of class and tenant, with prompts of minTokens to
// maxTokens, the scheduler would take now: the intake pulls only that many,
// so work stays in JetStream for workers with room (memory-aware load
// balancing by pulling). When the next step can start such a job (a slot
// and memory beside the jobs already waiting) it is as many as the next
// step can start (slots, memory, and the prefill budget for prompts of
// minTokens). Otherwise it is one when the tenant has no job of the
// class waiting yet (up to LookAheadTenants tenants, however many jobs the
// others have waiting: one tenant's batch, fetched while memory seemed
// free, must not close the look-ahead to the rest), so that admission,
// which is fair between tenants, sees every tenant's next job; or when
// fewer than LookAhead jobs of the class wait and the largest such prompt
// fits in the memory not promised with a slot free — or, for a class above
// running preemptible work, when preempting that work would make the room:
// a high-priority job is pulled into a full worker, and admission preempts
// for it. Else none. When the arena could never hold the largest prompt,
// the smallest decides: a job that fits is run, one that can never fit is
// refused (ErrTooLarge), and none waits in JetStream for a worker that
// will never take it. An empty tenant (jobs of the old subject form) gets
// no look-ahead of its own.
func (s *Scheduler) Room(class int, tenant string, minTokens, maxTokens int) int {
	if class < 0 || class >= numClasses {
		return 0
	}
	need := int64(s.pagesAt(min(maxTokens, s.m.Context)+1, true))
	if need > int64(s.bm.n) {
		need = int64(s.pagesAt(min(minTokens, s.m.Context)+1, true))
	}
	avail := s.snapAvail.Load()
	// Jobs the scheduler has or is being handed and has not started.
	pending := s.snapWaiting()
	for c := range numClasses {
		pending += s.sent[c].Load()
	}
	if s.snapRunning.Load()+pending < int64(s.cfg.MaxRunning) && need*(pending+1) <= avail {
		// A slot and the memory for this job besides those already
		// waiting: the next step admits it, so an idle worker fills its
		// batch at once instead of LookAhead jobs a step — as far as the
		// next step can start their prompts (MaxBatchTokens of prompts
		// of at least minTokens each): a batch of long documents
		// submitted at once is not all taken by the first idle worker
		// to pull, to wait there for its prefill budget while other
		// workers idle.
		n := min(int64(s.cfg.MaxRunning)-s.snapRunning.Load()-pending, avail/need-pending)
		if minTokens > 0 {
			n = min(n, max(1, int64(s.cfg.MaxBatchTokens/minTokens))-pending)
		}
		if n > 0 {
			return int(n)
		}
	}
	fresh, tenants, mine := s.fresh.count(class, tenant)
	if tenant != "" && mine == 0 && tenants < LookAheadTenants {
		return 1
	}
	if fresh >= LookAhead {
		return 0
	}
	slot := s.snapRunning.Load() < int64(s.cfg.MaxRunning)
	if need <= avail && slot {
		return 1
	}
	if below := s.snapBelowJobs[class].Load(); below > 0 && need <= avail+s.snapBelowBlocks[class].Load() {
		return 1
	}
	return 0
}

// freshJobs counts jobs handed to Generate and not admitted yet, per class
// and per class and tenant. Generate adds, the step loop subtracts; the
// intake reads.
type freshJobs struct {
	mu       sync.Mutex
	byTenant [numClasses]map[string]int
}

func (f *freshJobs) add(class int, tenant string, d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byTenant[class] == nil {
		f.byTenant[class] = map[string]int{}
	}
	if n := f.byTenant[class][tenant] + d; n > 0 {
		f.byTenant[class][tenant] = n
	} else {
		delete(f.byTenant[class], tenant)
	}
}

// count returns the class's fresh jobs, the tenants they are of, and the
// tenant's among them.
func (f *freshJobs) count(class int, tenant string) (all, tenants, mine int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.byTenant[class] {
		all += n
	}
	return all, len(f.byTenant[class]), f.byTenant[class][tenant]
}

// snapWaiting is the number of jobs waiting in the last snapshot.
func (s *Scheduler) snapWaiting() int64 {
	var n int64
	for c := range numClasses {
		n += s.snapWaitingClass[c].Load()
	}
	return n
}

// OnCapacity registers f to be called, on the step loop, whenever the
// scheduler may take more work than at its last snapshot: memory freed, a
// sequence ended, or a waiting job admitted. An intake that Room
// turned away looks again then, instead of at its next poll. f must not
// block.
func (s *Scheduler) OnCapacity(f func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchers = append(s.watchers, f)
}

// tellWatchers calls the OnCapacity functions.
func (s *Scheduler) tellWatchers() {
	s.watchMu.Lock()
	ws := s.watchers
	s.watchMu.Unlock()
	for _, f := range ws {
		f()
	}
}

func (s *Scheduler) publishSnapshot() {
	// More room than the last snapshot showed: the watchers look again.
	avail, running := int64(s.bm.available()-s.committed()), int64(len(s.running))
	if avail > s.snapAvail.Load() || running < s.snapRunning.Load() || int64(len(s.waiting)) < s.snapWaiting() || s.freshTaken {
		defer s.tellWatchers()
	}
	s.freshTaken = false
	s.snapAvail.Store(avail)
	s.snapRunning.Store(running)
	var waiting, blocks, jobs [numClasses]int64
	for _, q := range s.waiting {
		waiting[q.opts.Class]++
	}
	for _, q := range s.running {
		if q.reserved {
			continue
		}
		n := int64(s.privateBlocks(q))
		for c := 0; c < q.opts.Class; c++ {
			blocks[c] += n
			jobs[c]++
		}
	}
	for c := range numClasses {
		s.snapWaitingClass[c].Store(waiting[c])
		s.sent[c].Add(-s.enqueued[c])
		s.enqueued[c] = 0
		s.snapBelowBlocks[c].Store(blocks[c])
		s.snapBelowJobs[c].Store(jobs[c])
	}
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
		// The loop never blocks while it has work, and the goroutines it
		// made runnable (a Generate caller it answered, the intake it
		// told of room) queue behind it on its processor: give them
		// their turn between steps rather than at the runtime's next
		// preemption, which a step of assembly kernels can put off.
		runtime.Gosched()
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
	if !q.admitted {
		s.fresh.add(q.opts.Class, q.opts.Tenant, -1)
		s.freshTaken = true
	}
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

// releaseBlocks gives back every block q holds, last position first: a
// block in the prefix cache is of use only with every block before it,
// and the cache's LRU reuses what it got first, so the tail of a
// preempted prompt goes before its head, and what is left of it is
// still a prefix when the job comes back.
func (s *Scheduler) releaseBlocks(q *seq) {
	L := 0
	for _, t := range q.tables {
		L = max(L, len(t))
	}
	for i := L - 1; i >= 0; i-- {
		for _, t := range q.tables {
			if i < len(t) && t[i] >= 0 {
				s.bm.release(t[i])
			}
		}
	}
	for g := range q.tables {
		q.tables[g] = q.tables[g][:0]
	}
	q.held, q.lo, q.shared = 0, 0, 0
}

func (s *Scheduler) event(q *seq, kind, detail string) {
	if q.opts.OnEvent != nil {
		q.opts.OnEvent(kind, detail)
	}
}
