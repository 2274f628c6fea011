package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// SchedulerConfig configures Scheduler. The sizes default to the
// benchmark's published ones; a test gives small ones.
type SchedulerConfig struct {
	// Model is the GGUF file to schedule. Defaults to "": the generated
	// 134M Q8_0 model, written to a temporary folder.
	Model string
	// Threads is the CPU thread count. Defaults to 1.
	Threads int
	// JobCounts are the numbers of jobs of part 1, each run one at a time
	// and then together. Defaults to 1, 4, 16, 32.
	JobCounts []int
	// NewTokens is what each job of part 1 generates. Defaults to 32.
	NewTokens int
	// Probes is the number of high-priority jobs timed in part 2, per
	// condition. Defaults to 400: of 50, the p99 is the largest, which one
	// stall of a shared machine decides; of 200, the second largest, and
	// two runs' ratios still differed by half.
	Probes int
	// LoadJobs is the number of low-priority jobs that keep the scheduler
	// busy in part 2. Defaults to 24.
	LoadJobs int
	// MixJobs is the number of jobs of part 3's mixed workload. Defaults
	// to 40.
	MixJobs int
	// MixTokens is what each job of part 3 generates. Defaults to 64:
	// long enough that the jobs hold their blocks while others wait, so
	// that memory, not only the prefill budget, holds the queue back.
	MixTokens int
	// ResumeTokens are the sequence lengths of part 4. Defaults to 256,
	// 1024.
	ResumeTokens []int
	// Progress receives a line when the generated model is written.
	// Defaults to io.Discard.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c SchedulerConfig) WithDefaults() SchedulerConfig {
	if c.Threads == 0 {
		c.Threads = 1
	}
	if len(c.JobCounts) == 0 {
		c.JobCounts = []int{1, 4, 16, 32}
	}
	if c.NewTokens == 0 {
		c.NewTokens = 32
	}
	if c.Probes == 0 {
		c.Probes = 400
	}
	if c.LoadJobs == 0 {
		c.LoadJobs = 24
	}
	if c.MixJobs == 0 {
		c.MixJobs = 40
	}
	if c.MixTokens == 0 {
		c.MixTokens = 64
	}
	if len(c.ResumeTokens) == 0 {
		c.ResumeTokens = []int{256, 1024}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// SchedulerResults are the measurements of Scheduler, one field per part.
type SchedulerResults struct {
	Throughput []Throughput
	// Idle, Loaded and Uninterrupted are the high-priority times to first
	// token (queue included) in milliseconds, sorted: with the scheduler
	// idle, under low-priority load, and under load with NoInterrupt.
	Idle, Loaded, Uninterrupted []float64
	Occupancy                   []Occupancy
	Resume                      []Resume
}

// Throughput is part 1 for one job count: tokens per second of the jobs
// run one at a time (once) and together (the best of three runs), and of
// the engine alone on the same shape (the best of three runs, each right
// after one of the batched ones).
type Throughput struct {
	Jobs           int
	Alone, Batched float64
	// Steady is the batched jobs' rate while every one of them was
	// decoding (from the last job's first token to the first job's last;
	// the best of the three runs), tokens per second: what the
	// scheduler's decode steps deliver, prompts aside, to set against
	// Engine.
	Steady float64
	// Engine is the engine's own decode of Jobs sequences together, in
	// the same process (the forward pass alone: no prompts, sampling or
	// scheduling), from an empty context as `bench --batch` measures it,
	// tokens per second.
	Engine float64
	// EngineAtJobs is the same decode at the jobs' positions, after their
	// prompts: what the jobs' decode steps cost the engine (each row
	// attends to its prompt too: 3–5 % slower at 16 tokens of prompt on
	// the 134M model).
	EngineAtJobs float64
	// EngineJobs is the engine running the same jobs by hand: every
	// prompt in one forward pass, then the decode steps, with no sampling
	// or scheduling, tokens per second. Batched over it is what the
	// scheduler keeps of the forward passes the jobs need.
	EngineJobs float64
	// SteadyOfEngine and BatchedOfJobs are Steady over EngineAtJobs and
	// Batched over EngineJobs, each taken within the pair of a batched run
	// and the engine's runs right after it (this machine's speed drifts
	// within seconds): the median of the three pairs.
	SteadyOfEngine, BatchedOfJobs float64
	// Total is Batched with the prompts' tokens counted too, input and
	// output tokens per second (the total of vLLM's throughput
	// benchmark): set against Engine, how busy the schedule keeps the
	// forward pass. Batched against Engine stays below EngineJobs against
	// Engine, what the engine itself gets running the same jobs by hand:
	// a prompt row costs it about what a decode row does.
	Total float64
}

// Occupancy is part 3 for one scheduler setting: how well the mixed
// workload packed the KV arena.
type Occupancy struct {
	NoFiller bool
	// Fill is tokens held ÷ the capacity of the blocks in use; Occupied
	// is arena blocks in use ÷ allocated while jobs waited.
	Fill, Occupied float64
	Steps          int64
	Preemptions    int64
	Took           time.Duration
	// Waits counts the steps run while jobs waited, by what held them.
	Waits sched.WaitSteps
	// Arena is how the arena was taken while jobs waited for memory.
	Arena sched.ArenaShares
}

// Resume is part 4 for one sequence length: the cost of bringing a
// preempted sequence back by swapping its blocks in against recomputing.
type Resume struct {
	Tokens, Blocks  int
	Bytes           int64
	Swap, Recompute time.Duration
}

// Scheduler measures the scheduler on the CPU and writes the report to w
// part by part as it goes: (1) batched against one-at-a-time throughput,
// (2) high-priority latency idle and under load, (3) KV utilization under
// a mixed workload, (4) swap against recompute resume cost.
func Scheduler(ctx context.Context, cfg SchedulerConfig, w io.Writer) (*SchedulerResults, error) {
	cfg = cfg.WithDefaults()
	l, path, closeModel, err := loadCPUModel(cfg.Model, "134m", cfg.Threads, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer closeModel()
	cfg.Model = path
	b := &schedBench{ctx: ctx, cfg: cfg, l: l, r: rand.New(rand.NewPCG(1, 1)), w: w}
	res := &SchedulerResults{}
	fmt.Fprintf(w, "model %s, %d thread(s)\n\n", filepath.Base(cfg.Model), cfg.Threads)
	if res.Throughput, err = b.throughput(); err != nil {
		return nil, err
	}
	if res.Idle, res.Loaded, res.Uninterrupted, err = b.priority(); err != nil {
		return nil, err
	}
	if res.Occupancy, err = b.occupancy(); err != nil {
		return nil, err
	}
	if res.Resume, err = b.resume(); err != nil {
		return nil, err
	}
	return res, nil
}

// loadCPUModel loads path on a CPU backend of threads threads, or, when
// path is "", a generated Q8_0 model of the synthetic shape written to a
// temporary folder. It returns the model's path and what releases it all.
func loadCPUModel(path, shape string, threads int, progress io.Writer) (*engine.Loaded, string, func(), error) {
	var undo []func()
	closeAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if path == "" {
		dir, err := os.MkdirTemp("", "zerolayer-bench-"+shape+"-")
		if err != nil {
			return nil, "", nil, err
		}
		undo = append(undo, func() { os.RemoveAll(dir) })
		t, err := WriteSynthetic(dir, shape, gpu.Q8_0, progress)
		if err != nil {
			closeAll()
			return nil, "", nil, err
		}
		path = t.Path
	}
	be, err := device.Open(device.CPU, threads, nil)
	if err != nil {
		closeAll()
		return nil, "", nil, err
	}
	undo = append(undo, func() { be.Close() })
	l, err := engine.Load(path, be)
	if err != nil {
		closeAll()
		return nil, "", nil, err
	}
	undo = append(undo, func() { l.Close() })
	return l, path, closeAll, nil
}

// schedBench is the state the parts of Scheduler share.
type schedBench struct {
	ctx context.Context
	cfg SchedulerConfig
	l   *engine.Loaded
	r   *rand.Rand
	w   io.Writer
}

// start starts a scheduler of the model.
func (b *schedBench) start(cfg sched.Config) (*sched.Scheduler, error) {
	s, err := sched.New(b.l.Model, b.l.Tokenizer, cfg)
	if err == nil {
		err = s.Start(b.ctx)
	}
	return s, err
}

// prompt is a random prompt of n tokens.
func (b *schedBench) prompt(n int) []int32 { return randomPrompt(b.r, b.l.Model.Vocab, n) }

// randomPrompt is a prompt of n tokens: BOS, then ids drawn from r past
// the first three (special) ones.
func randomPrompt(r *rand.Rand, vocab, n int) []int32 {
	p := []int32{1}
	for len(p) < n {
		p = append(p, int32(3+r.IntN(vocab-3)))
	}
	return p
}

// gen runs one job of maxTok tokens past any end of generation; onToken,
// if not nil, is its request's OnToken.
func (b *schedBench) gen(s *sched.Scheduler, p []int32, maxTok int, opts sched.JobOpts, onToken func(engine.Token) error) (*engine.Result, sched.Stats, error) {
	return s.Generate(b.ctx, &engine.Request{PromptIDs: p, MaxTokens: maxTok, IgnoreEOS: true, OnToken: onToken}, opts)
}

// throughput is part 1: N jobs together against the same N alone.
func (b *schedBench) throughput() ([]Throughput, error) {
	const prompt = 16 // tokens of each job's prompt
	fmt.Fprintf(b.w, "1. aggregate decode throughput (prompt %d, %d new tokens each)\n", prompt, b.cfg.NewTokens)
	s, err := b.start(sched.Config{KVMemoryMB: 512, MaxRunning: 64})
	if err != nil {
		return nil, err
	}
	defer s.Stop(context.Background())
	var out []Throughput
	for _, n := range b.cfg.JobCounts {
		ps := make([][]int32, n)
		for i := range ps {
			ps[i] = b.prompt(prompt)
		}
		t0 := time.Now()
		for _, p := range ps {
			if _, _, err := b.gen(s, p, b.cfg.NewTokens, sched.JobOpts{}, nil); err != nil {
				return nil, err
			}
		}
		alone := time.Since(t0)
		// Together, three runs, each on prompts of its own (so that no
		// run finds another's in the prefix cache), each followed at once
		// by the engine on the same shape: this machine's speed drifts
		// within seconds, so each ratio is taken within a pair, and the
		// median pair's is reported beside the best figures.
		r, err := newModelRun(b.ctx, b.l.Model, prompt+b.cfg.NewTokens, n, 1)
		if err != nil {
			return nil, err
		}
		tok := float64(n * b.cfg.NewTokens)
		t := Throughput{Jobs: n, Alone: tok / alone.Seconds()}
		var steadyOf, batchedOf []float64
		for range 3 {
			qs := make([][]int32, n)
			for i := range qs {
				qs[i] = b.prompt(prompt)
			}
			d, st, err := b.together(s, qs)
			if err != nil {
				return nil, err
			}
			e, err := b.engine(r, qs)
			if err != nil {
				return nil, err
			}
			batched := tok / d.Seconds()
			t.Batched, t.Steady = max(t.Batched, batched), max(t.Steady, st)
			t.Engine, t.EngineAtJobs, t.EngineJobs = max(t.Engine, e.decode), max(t.EngineAtJobs, e.atJobs), max(t.EngineJobs, e.jobs)
			steadyOf, batchedOf = append(steadyOf, st/e.atJobs), append(batchedOf, batched/e.jobs)
		}
		t.SteadyOfEngine, t.BatchedOfJobs = median(steadyOf), median(batchedOf)
		t.Total = t.Batched * float64(prompt+b.cfg.NewTokens) / float64(b.cfg.NewTokens)
		fmt.Fprintf(b.w, "   %2d jobs: one at a time %7.1f tok/s, batched %7.1f tok/s (×%.2f), while all %d decode %7.1f tok/s\n",
			n, t.Alone, t.Batched, t.Batched/t.Alone, n, t.Steady)
		fmt.Fprintf(b.w, "            engine alone: batch-%d decode %7.1f tok/s from an empty context (batched %.0f%%, while all decode %.0f%% of it), %7.1f at the jobs' positions; the same jobs %7.1f tok/s\n",
			n, t.Engine, 100*t.Batched/t.Engine, 100*t.Steady/t.Engine, t.EngineAtJobs, t.EngineJobs)
		fmt.Fprintf(b.w, "            each run against the engine's right after it: while all decode %s of its decode at the jobs' positions, batched %s of the same jobs (medians %.0f%%, %.0f%%)\n",
			percents(steadyOf), percents(batchedOf), 100*t.SteadyOfEngine, 100*t.BatchedOfJobs)
		fmt.Fprintf(b.w, "            prompts counted: batched %7.1f tok/s in and out (%.0f%% of the engine's batch-%d decode); the engine's own run of the same jobs gets %.0f%% of its decode in new tokens, batched's ceiling\n",
			t.Total, 100*t.Total/t.Engine, n, 100*t.EngineJobs/t.Engine)
		out = append(out, t)
	}
	return out, nil
}

// together runs one job per prompt of ps at once. It returns how long the
// last took to finish, and the rate at which the jobs received tokens while
// all of them were decoding (steadyRate).
func (b *schedBench) together(s *sched.Scheduler, ps [][]int32) (time.Duration, float64, error) {
	t0 := time.Now()
	stamps := make([][]time.Time, len(ps)) // each job's token arrival times
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stamp := func(engine.Token) error { stamps[i] = append(stamps[i], time.Now()); return nil }
			if _, _, err := b.gen(s, p, b.cfg.NewTokens, sched.JobOpts{}, stamp); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	return took, steadyRate(stamps), nil
}

// steadyRate is the rate, in tokens per second, at which jobs whose token
// arrival times are stamps received tokens while every one of them was
// decoding: between the last job's first token and the first job's last.
// The span is measured on the last-starting job's own tokens, from its
// first to its last before the first job ends, so that it covers whole
// steps: each step delivers its tokens in a burst (one per job, over the
// step's sampling), and a span ending at the first token of a burst holds
// that step's forward pass but not its tokens (with 16 jobs of 32 tokens
// that understated the rate by about 3 %). 0 if no job is in the span.
func steadyRate(stamps [][]time.Time) float64 {
	a := -1 // the job whose first token came last
	var to time.Time
	for i, st := range stamps {
		if len(st) == 0 {
			return 0
		}
		if a < 0 || st[0].After(stamps[a][0]) {
			a = i
		}
		if i == 0 || st[len(st)-1].Before(to) {
			to = st[len(st)-1]
		}
	}
	if a < 0 {
		return 0
	}
	from, end := stamps[a][0], stamps[a][0]
	for _, t := range stamps[a][1:] {
		if t.After(to) {
			break
		}
		end = t
	}
	if !end.After(from) {
		return 0
	}
	n := 0
	for _, st := range stamps {
		for _, t := range st {
			if t.After(from) && !t.After(end) {
				n++
			}
		}
	}
	return float64(n) / end.Sub(from).Seconds()
}

// engineRun is the engine alone on part 1's jobs, tokens per second.
type engineRun struct {
	// decode: len(ps) sequences decoding together for NewTokens steps
	// from an empty context, as `bench --batch` measures; atJobs: the
	// same at the jobs' positions (after their prompts), whose attention
	// reads the prompts' K and V too.
	decode, atJobs float64
	// jobs: the same jobs run by hand, every prompt in one forward pass
	// (which gives each job its first token), then NewTokens−1 decode
	// steps.
	jobs float64
}

// engine runs the engine alone on part 1's jobs, prompts ps, in the same
// process, once each way (engineRun): what the batched jobs would get if
// their sampling and scheduling cost nothing.
func (b *schedBench) engine(r *modelRun, ps [][]int32) (engineRun, error) {
	n, m := len(ps), b.l.Model
	var e engineRun
	var toks, pos, seq, last []int32
	for s, p := range ps {
		for i, t := range p {
			toks, pos, seq = append(toks, t), append(pos, int32(i)), append(seq, int32(s))
		}
		last = append(last, int32(len(toks)-1))
	}
	logits := make([]float32, n*m.Vocab)
	t0 := time.Now()
	if err := m.Forward(r.kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: r.tables(n)}, last, logits); err != nil {
		return e, err
	}
	dt, dpos, sq, lr := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	batch := &gpu.Batch{Pos: dpos, Seq: sq, Tables: r.tables(n)}
	for step := 1; step < b.cfg.NewTokens; step++ {
		for s := range ps {
			dt[s], dpos[s], sq[s], lr[s] = r.token(step+s), int32(len(ps[s])+step-1), int32(s), int32(s)
		}
		if err := m.Forward(r.kv, dt, batch, lr, logits); err != nil {
			return e, err
		}
	}
	tok := float64(n * b.cfg.NewTokens)
	e.jobs = tok / time.Since(t0).Seconds()
	// Part 1's prompts are all of one length.
	d, err := r.decode(n, len(ps[0]), b.cfg.NewTokens)
	if err != nil {
		return e, err
	}
	e.atJobs = tok / d.Seconds()
	if d, err = r.decode(n, 0, b.cfg.NewTokens); err != nil {
		return e, err
	}
	e.decode = tok / d.Seconds()
	return e, nil
}

// median is the middle of v (the upper one of an even count), which it
// leaves in its order.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return percentile(s, .5)
}

// percents formats ratios as "91/93/90%".
func percents(v []float64) string {
	p := make([]string, len(v))
	for i, x := range v {
		p[i] = fmt.Sprintf("%.0f", 100*x)
	}
	return strings.Join(p, "/") + "%"
}

// priorityRounds is how many rounds part 2's probes run in.
const priorityRounds = 4

// priority is part 2: high-priority time to first token, idle and under
// low-priority load, with steps interrupted and not. The three conditions
// take turns, a round of probes each, priorityRounds times over: this
// machine's speed drifts by tens of percent within seconds, and a p99
// taken from each condition's own stretch of time compared the machine's
// phases as much as the scheduler's conditions.
func (b *schedBench) priority() (idle, busy, uninterrupted []float64, err error) {
	fmt.Fprintf(b.w, "\n2. high-priority time to first token (prompt 32, 8 tokens; %d probes a condition in %d rounds, the conditions taking turns)\n", b.cfg.Probes, priorityRounds)
	conds := []struct{ load, noInterrupt bool }{{false, false}, {true, false}, {true, true}}
	lat := make([][]float64, len(conds))
	scheds := make([]*sched.Scheduler, len(conds))
	defer func() {
		for _, s := range scheds {
			if s != nil {
				s.Stop(context.Background())
			}
		}
	}()
	for i, c := range conds {
		if scheds[i], err = b.start(sched.Config{KVMemoryMB: 64, MaxRunning: 16, NoInterrupt: c.noInterrupt}); err != nil {
			return nil, nil, nil, err
		}
	}
	for r := range priorityRounds {
		per := b.cfg.Probes / priorityRounds
		if r < b.cfg.Probes%priorityRounds {
			per++
		}
		if per == 0 {
			continue
		}
		for i, c := range conds {
			l, err := b.ttft(scheds[i], c.load, per)
			if err != nil {
				return nil, nil, nil, err
			}
			lat[i] = append(lat[i], l...)
		}
	}
	for _, l := range lat {
		sort.Float64s(l)
	}
	idle, busy, uninterrupted = lat[0], lat[1], lat[2]
	p := percentile
	fmt.Fprintf(b.w, "   idle:   p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms\n", p(idle, .5), p(idle, .9), p(idle, .99))
	fmt.Fprintf(b.w, "   loaded: p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms  (p99 ×%.2f of idle)\n", p(busy, .5), p(busy, .9), p(busy, .99), p(busy, .99)/p(idle, .99))
	fmt.Fprintf(b.w, "   loaded, steps not interrupted (NoInterrupt): p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms  (p99 ×%.2f of idle)\n",
		p(uninterrupted, .5), p(uninterrupted, .9), p(uninterrupted, .99), p(uninterrupted, .99)/p(idle, .99))
	return idle, busy, uninterrupted, nil
}

// ttft times n probes' queue and first token on s, with or without the
// low-priority load, which ends before ttft returns.
func (b *schedBench) ttft(s *sched.Scheduler, load bool, n int) ([]float64, error) {
	lctx, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }() // the load ends with its context
	if load {
		for i := 0; i < b.cfg.LoadJobs; i++ {
			// A fresh prompt per job, each load goroutine from its own
			// source: b.r is not safe for concurrent use.
			r := rand.New(rand.NewPCG(2, uint64(i)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for lctx.Err() == nil {
					p := randomPrompt(r, b.l.Model.Vocab, 64)
					s.Generate(lctx, &engine.Request{PromptIDs: p, MaxTokens: 64, IgnoreEOS: true}, sched.JobOpts{Class: 2, Tenant: "bulk"})
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
	}
	var lat []float64
	for i := 0; i < n; i++ {
		if load {
			// Arrive at a random point of a low-priority step.
			time.Sleep(time.Duration(b.r.IntN(50)) * time.Millisecond)
		}
		res, st, err := b.gen(s, b.prompt(32), 8, sched.JobOpts{Class: 0, Tenant: "vip"}, nil)
		if err != nil {
			return nil, err
		}
		lat = append(lat, st.QueueMs+res.Usage.TimeToFirstTokenMs)
	}
	return lat, nil
}

// occupancy is part 3: KV utilization under a mixed workload, with and
// without the filler.
func (b *schedBench) occupancy() ([]Occupancy, error) {
	fmt.Fprintf(b.w, "\n3. KV utilization, 50%% short (<64) / 30%% medium (256) / 20%% long (1024) prompts, %d new tokens\n", b.cfg.MixTokens)
	// 256 blocks hold about a third of the workload at once: memory, not
	// slots, is what admission has to pack. The same jobs without the
	// filler (a long prompt admitted by its first chunk) for comparison.
	// A source of its own: the workload does not change with how many
	// numbers parts 1 and 2 drew.
	r := rand.New(rand.NewPCG(3, 1))
	lengths := make([]int, b.cfg.MixJobs)
	for i := range lengths {
		lengths[i] = 8 + r.IntN(56)
		switch {
		case i%10 >= 8:
			lengths[i] = 1024
		case i%10 >= 5:
			lengths[i] = 256
		}
	}
	// The same prompts with and without the filler; the prefix cache of
	// one scheduler does not reach the other.
	prompts := make([][]int32, len(lengths))
	for i, n := range lengths {
		prompts[i] = randomPrompt(r, b.l.Model.Vocab, n)
	}
	var out []Occupancy
	for _, noFiller := range []bool{false, true} {
		s, err := b.start(sched.Config{KVBlocks: 256, MaxRunning: 32, MaxBatchTokens: 512, NoFiller: noFiller})
		if err != nil {
			return nil, err
		}
		var wg sync.WaitGroup
		var preempted atomic.Int64
		t0 := time.Now()
		for _, p := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, st, err := b.gen(s, p, b.cfg.MixTokens, sched.JobOpts{}, nil); err == nil {
					preempted.Add(int64(st.Preemptions))
				}
			}()
		}
		wg.Wait()
		o := Occupancy{NoFiller: noFiller, Took: time.Since(t0), Preemptions: preempted.Load()}
		o.Fill, o.Occupied, o.Steps = s.Utilization()
		o.Waits = s.WaitSteps()
		o.Arena = s.ArenaWhileWaiting()
		s.Stop(context.Background())
		name := "with the filler"
		if noFiller {
			name = "without (NoFiller)"
		}
		fmt.Fprintf(b.w, "   %-19s arena blocks in use ÷ allocated while jobs waited: %.1f%%; tokens held ÷ capacity of the blocks in use: %.1f%% (%d steps, %d preemptions, %.1f s)\n",
			name, 100*o.Occupied, 100*o.Fill, o.Steps, o.Preemptions, o.Took.Seconds())
		fmt.Fprintf(b.w, "   %-19s steps with jobs waiting, by what held them: memory %d, slots %d, prefill budget %d, a shared prefix %d\n",
			"", o.Waits.Memory, o.Waits.Slots, o.Waits.Compute, o.Waits.Prefix)
		fmt.Fprintf(b.w, "   %-19s the arena while jobs waited for memory: in use %.1f%%, promised to prompts %.1f%%, kept for growth %.1f%%, free %.1f%%\n",
			"", 100*o.Arena.InUse, 100*o.Arena.Promised, 100*o.Arena.Growth, 100*o.Arena.Free)
		out = append(out, o)
	}
	return out, nil
}

// resume is part 4: copying a victim's blocks back against recomputing
// them.
func (b *schedBench) resume() ([]Resume, error) {
	fmt.Fprintf(b.w, "\n4. resume cost of a preempted sequence\n")
	var out []Resume
	for _, n := range b.cfg.ResumeTokens {
		r, err := b.resumeOne(n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(b.w, "   %4d tokens (%d blocks, %.1f MiB): swap in %8.3f ms, recompute %9.1f ms  (×%.0f)\n",
			n, r.Blocks, float64(r.Bytes)/(1<<20), float64(r.Swap.Microseconds())/1000, float64(r.Recompute.Microseconds())/1000, r.Recompute.Seconds()/r.Swap.Seconds())
		out = append(out, r)
	}
	return out, nil
}

// resumeOne times the prefill of an n-token sequence, and swapping its
// blocks in through the backend's host tier.
func (b *schedBench) resumeOne(n int) (Resume, error) {
	const bt = gpu.DefaultBlockTokens
	m := b.l.Model
	kv, err := m.NewKV((n+bt-1)/bt, bt)
	if err != nil {
		return Resume{}, err
	}
	toks := b.prompt(n)
	pos, seq, tab := make([]int32, n), make([]int32, n), make([]int32, (n+bt-1)/bt)
	for i := range pos {
		pos[i] = int32(i)
	}
	for i := range tab {
		tab[i] = int32(i)
	}
	logits := make([]float32, m.Vocab)
	t0 := time.Now()
	if err := m.Forward(kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: [][]int32{tab}}, []int32{int32(n - 1)}, logits); err != nil {
		return Resume{}, err
	}
	r := Resume{Tokens: n, Blocks: len(tab), Bytes: int64(len(tab)) * kv.Config().BlockBytes(), Recompute: time.Since(t0)}
	// Through the backend's host tier, as the scheduler swaps: out, then
	// in (timed, until the device has the blocks).
	be := m.Backend()
	tier, err := gpu.NewHostTier(be, kv, len(tab))
	if err != nil {
		return Resume{}, err
	}
	moves := make([]gpu.BlockMove, len(tab))
	for i := range moves {
		moves[i] = gpu.BlockMove{From: i, To: i}
	}
	if err := tier.Out(moves); err != nil {
		return Resume{}, err
	}
	if err := be.Sync(); err != nil {
		return Resume{}, err
	}
	t0 = time.Now()
	if err := tier.In(moves); err != nil {
		return Resume{}, err
	}
	if err := be.Sync(); err != nil {
		return Resume{}, err
	}
	r.Swap = time.Since(t0)
	return r, nil
}

// percentile is the q-quantile of sorted s (not empty).
func percentile(s []float64, q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
