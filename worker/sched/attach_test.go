package sched

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// sharedPrompts returns n prompts that share their first prefix tokens
// (random ones, from seed) and then differ at their first own token.
func sharedPrompts(n, prefix, tail int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	common := []int32{1}
	for len(common) < prefix {
		common = append(common, int32(2+r.IntN(400)))
	}
	var out [][]int32
	for i := range n {
		p := append(slices.Clone(common), int32(300+i))
		for len(p) < prefix+tail {
			p = append(p, int32(2+r.IntN(400)))
		}
		out = append(out, p)
	}
	return out
}

// startQueued starts s once every job of jobs has been handed to it, so
// the first admission pass sees them all and what follows does not depend
// on goroutine timing; it returns the outcomes, in order, once all end.
func startQueued(t *testing.T, s *Scheduler, jobs []job, submit func([]job) []outcome) []outcome {
	t.Helper()
	var outs []outcome
	done := make(chan struct{})
	go func() { outs = submit(jobs); close(done) }()
	waitFor(t, 10*time.Second, "every job submitted", func() bool { return len(s.submit) >= len(jobs) })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	return outs
}

// sameAsAlone fails the test for an outcome with an error and reports
// each output that differs from want's (the job run alone); first is the
// number of the first job, for the messages.
func sameAsAlone(t *testing.T, outs []outcome, want [][]int32, first int) {
	t.Helper()
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("job %d: %v", first+i, o.err)
		}
		if !slices.Equal(o.res.OutputIDs, want[i]) {
			t.Errorf("job %d: %v\nalone:  %v", first+i, o.res.OutputIDs, want[i])
		}
	}
}

// newQueued returns a scheduler not started yet, stopped at cleanup.
func newQueued(t *testing.T, l *engine.Loaded, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(l.Model, l.Tokenizer, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, s)
	return s
}

// TestAttachBurst: jobs sharing a prompt prefix, all queued at once, are
// admitted one first; the others wait for its prefill of the shared blocks
// and take them from the prefix cache: no prompt token is computed twice,
// each later job's memory counts its own blocks and reports the shared
// ones apart, and the outputs are those of each job alone.
func TestAttachBurst(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	const n, prefix = 10, 100 // six full shared blocks, then 4 tokens
	var jobs []job
	for _, p := range sharedPrompts(n, prefix, 8, 11) {
		jobs = append(jobs, job{prompt: p, max: 12})
	}
	want := alone(t, l, jobs)
	// Chunks of 32: the first job's prefill of the prefix takes four steps.
	s := newQueued(t, l, Config{MaxBatchTokens: 32})
	outs := startQueued(t, s, jobs, func(jobs []job) []outcome { return run(s, jobs) })
	sameAsAlone(t, outs, want, 0)
	bb := s.BlockBytes()
	owners := 0
	for i, o := range outs {
		u := o.res.Usage
		total := int64(s.blocksFor(len(jobs[i].prompt)+len(o.res.OutputIDs)-1)) * bb
		switch o.stats.CachedInputTokens {
		case 0:
			owners++
			if u.SharedKVBytes != 0 || u.KVBytes != total {
				t.Errorf("job %d computed its prompt: %d own and %d shared KV bytes, want %d and 0", i, u.KVBytes, u.SharedKVBytes, total)
			}
		case prefix / 16 * 16:
			if u.SharedKVBytes != prefix/16*bb || u.KVBytes != total-prefix/16*bb {
				t.Errorf("job %d shared %d blocks: %d own and %d shared KV bytes, want %d and %d",
					i, prefix/16, u.KVBytes, u.SharedKVBytes, total-prefix/16*bb, prefix/16*bb)
			}
		default:
			t.Errorf("job %d: %d cached input tokens, want 0 (the first) or %d", i, o.stats.CachedInputTokens, prefix/16*16)
		}
	}
	if owners != 1 {
		t.Errorf("%d jobs computed the shared prefix, want 1", owners)
	}
	sharedOnce(t, s, n-1, n-1)
}

// sharedOnce checks, once every job is done, that between minAttached and
// maxAttached jobs attached and that no prompt token was computed twice.
func sharedOnce(t *testing.T, s *Scheduler, minAttached, maxAttached int64) {
	t.Helper()
	t.Logf("%d attached, %d duplicated prompt tokens, %d steps", s.attaches.Load(), s.duplicated.Load(), s.stepCount.Load())
	if got := s.attaches.Load(); got < minAttached || got > maxAttached {
		t.Errorf("%d jobs attached, want %d to %d", got, minAttached, maxAttached)
	}
	if d := s.duplicated.Load(); d != 0 {
		t.Errorf("%d prompt tokens computed twice, want 0", d)
	}
	checkIdle(t, s)
}

// TestNoAttachWithoutCache: with the prefix cache off nothing attaches,
// and the same burst computes the shared blocks once per job (which the
// duplicate counter sees).
func TestNoAttachWithoutCache(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	var jobs []job
	for _, p := range sharedPrompts(4, 100, 8, 11) {
		jobs = append(jobs, job{prompt: p, max: 4})
	}
	s := newQueued(t, l, Config{MaxBatchTokens: 32, DisablePrefixCache: true, MaxStepLatency: -1, NoDrafts: true})
	for i, o := range startQueued(t, s, jobs, func(jobs []job) []outcome { return run(s, jobs) }) {
		if o.err != nil || o.stats.CachedInputTokens != 0 {
			t.Fatalf("job %d: %v, %d cached tokens", i, o.err, o.stats.CachedInputTokens)
		}
	}
	if s.attaches.Load() != 0 {
		t.Errorf("%d jobs attached with the prefix cache off", s.attaches.Load())
	}
	if d := s.duplicated.Load(); d != 3*96 {
		t.Errorf("%d prompt tokens computed twice, want %d (three more prefills of six blocks)", d, 3*96)
	}
	checkIdle(t, s)
}

// cancelAfterCtx is a context that reports itself canceled from its
// after-th Err call on: the step loop asks every job's Err once a loop
// (reap), so the job is canceled after a set number of steps whatever the
// machine's speed.
type cancelAfterCtx struct {
	context.Context
	calls, after atomic.Int64
}

func (c *cancelAfterCtx) Err() error {
	if c.calls.Add(1) >= c.after.Load() {
		return context.Canceled
	}
	return nil
}

// TestAttachOwnerCanceled: the job computing a shared prefix is canceled
// part-way; the jobs waiting for it are not stranded: one of them goes on
// from the blocks already in the cache, the others wait for it, and every
// output is as alone, still without a token computed twice.
func TestAttachOwnerCanceled(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	const n, prefix = 6, 200
	var jobs []job
	for _, p := range sharedPrompts(n, prefix, 8, 12) {
		jobs = append(jobs, job{prompt: p, max: 10})
	}
	want := alone(t, l, jobs[1:])
	// Chunks of 16: the owner needs 13 steps for its prompt and is
	// canceled at the loop's third look, after two steps.
	s := newQueued(t, l, Config{MaxBatchTokens: 16})
	ownerCtx := &cancelAfterCtx{Context: context.Background()}
	ownerCtx.after.Store(3)
	var ownerErr error
	var ownerRes *engine.Result
	outs := startQueued(t, s, jobs, func(jobs []job) []outcome {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			ownerRes, _, ownerErr = s.Generate(ownerCtx, &engine.Request{PromptIDs: jobs[0].prompt, MaxTokens: jobs[0].max}, JobOpts{})
		}()
		// The owner is taken first: the others follow it into the queue.
		waitFor(t, 10*time.Second, "the owner submitted", func() bool { return len(s.submit) >= 1 })
		outs := run(s, jobs[1:])
		wg.Wait()
		return outs
	})
	if ownerErr != nil || ownerRes.StopReason != engine.StopCanceled {
		t.Fatalf("owner: %v, %+v; want canceled", ownerErr, ownerRes)
	}
	// The owner computed two blocks before it was canceled: one job takes
	// them and computes the rest of the prefix, the others wait for it.
	sameAsAlone(t, outs, want, 1)
	cached := map[int]int{}
	for _, o := range outs {
		cached[o.stats.CachedInputTokens]++
	}
	if cached[32] != 1 || cached[prefix/16*16] != n-2 {
		t.Errorf("cached input tokens (tokens: jobs) %v, want one job with the owner's 32 and %d with %d", cached, n-2, prefix/16*16)
	}
	// All waited for the owner; those after the new one wait again.
	sharedOnce(t, s, n-1, n-1)
}

// TestPacedPrefillEquivalence: a long prompt prefilled beside decodes is
// cut to MinPrefillTokens chunks when the step-latency bound cannot be met
// (the pacer is primed with a second-long step, the bound is a
// millisecond), and every output is as alone.
func TestPacedPrefillEquivalence(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	r := rand.New(rand.NewPCG(5, 6))
	var jobs []job
	for i := range 4 {
		jobs = append(jobs, job{prompt: reference(t)[i].PromptIDs, max: 40})
	}
	long := []int32{1}
	for len(long) < 300 {
		long = append(long, int32(2+r.IntN(400)))
	}
	jobs = append(jobs, job{prompt: long, max: 8})
	want := alone(t, l, jobs)
	s := newQueued(t, l, Config{MaxStepLatency: time.Millisecond, MinPrefillTokens: 16})
	for range pacerWarmup {
		s.pace.observe(stepShape{tokens: 10}, time.Second)
	}
	// All queued before the loop starts: the first step prefills the
	// short prompts and a first chunk of the long one; from the second on
	// the short ones decode and the long one goes on 16 tokens a step.
	sameAsAlone(t, startQueued(t, s, jobs, func(jobs []job) []outcome { return run(s, jobs) }), want, 0)
	t.Logf("%d paced steps of %d", s.paced.Load(), s.stepCount.Load())
	if s.paced.Load() == 0 {
		t.Error("no step's prefill was cut for the decodes")
	}
	checkIdle(t, s)
}

func TestPacerChunk(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	var p pacer
	if got := p.chunk(100*ms, stepShape{tokens: 8}, 0, 16, 256); got != 256 {
		t.Errorf("unmeasured: chunk %d, want the ceiling 256", got)
	}
	// Steps of 10 ms plus 1 ms a token, of assorted sizes, attention
	// free: enough of them that the early misfits no longer count as
	// spread.
	for i := range 200 {
		n := []int{8, 40, 8, 72, 24}[i%5]
		p.observe(stepShape{tokens: n}, 10*ms+time.Duration(n)*ms)
	}
	m, ok := p.model()
	t.Logf("fixed %.2f ms, %.3f ms a token, spread %.4f ms", m.fixed*1000, m.perToken*1000, p.spread(m)*1000)
	decodes := stepShape{tokens: 8}
	for _, tc := range []struct {
		bound    time.Duration
		base     stepShape
		floor, c int
		want     int
	}{
		{100 * ms, decodes, 16, 256, 82},      // (100 − 10) / 1 − 8
		{100 * ms, decodes, 16, 64, 64},       // the ceiling
		{15 * ms, decodes, 16, 256, 16},       // the floor: prompts always progress
		{500 * ms, stepShape{}, 16, 256, 256}, // room for more than the ceiling
	} {
		if got := p.chunk(tc.bound, tc.base, 0, tc.floor, tc.c); !ok || got < tc.want-1 || got > tc.want+1 {
			t.Errorf("chunk(%v, %+v, floor %d, ceiling %d) = %d, want %d", tc.bound, tc.base, tc.floor, tc.c, got, tc.want)
		}
	}
	// Steps all alike carry no slope: the mean time per token, which
	// errs towards shorter steps.
	var q pacer
	for range 10 {
		q.observe(stepShape{tokens: 20}, 40*ms)
	}
	if got := q.chunk(100*ms, decodes, 0, 16, 256); got != 42 {
		t.Errorf("uniform steps of 2 ms a token: chunk %d, want 42", got)
	}
}

// TestPacerAttention: a prompt prefilled in chunks beside decodes, its
// chunks attending to ever more positions; the pacer learns the cost per
// attended position and cuts the chunks as the context grows, so that
// the steps stay at the bound.
func TestPacerAttention(t *testing.T) {
	t.Parallel()
	const fixed, perToken, perAttn = 10e-3, 1e-3, 2e-6 // seconds
	cost := func(w stepShape) time.Duration {
		return time.Duration((fixed + perToken*float64(w.tokens) + perAttn*float64(w.attended)) * float64(time.Second))
	}
	bound := 100 * time.Millisecond
	var p pacer
	decodes := stepShape{tokens: 8, attended: 8 * 100}
	from, last := 0, 0
	var chunks []int
	for from < 4000 {
		k := p.chunk(bound, decodes, from, 4, 256)
		w := decodes
		w.tokens += k
		w.attended += attendedBy(from, k)
		d := cost(w)
		if p.steps > 20 && d > bound+time.Millisecond {
			m, _ := p.model()
			t.Fatalf("step %d: a chunk of %d from position %d takes %v, over the bound %v (model %+v, spread %.2f ms; chunks %v)", p.steps, k, from, d, bound, m, p.spread(m)*1e3, chunks)
		}
		p.observe(w, d)
		chunks = append(chunks, k)
		from += k
		last = k
	}
	m, _ := p.model()
	t.Logf("fitted fixed %.2f ms, %.3f ms a token, %.4f µs an attended position; chunks %v", m.fixed*1e3, m.perToken*1e3, m.perAttn*1e6, chunks)
	if math.Abs(m.perAttn/perAttn-1) > 0.05 || math.Abs(m.perToken/perToken-1) > 0.05 {
		t.Errorf("fitted %.4f ms a token, %.5f ms a position: want %.4f and %.5f", m.perToken*1e3, m.perAttn*1e3, perToken*1e3, perAttn*1e3)
	}
	// At the end: (100 − 10 − 8 − 1.6) ms for k rows at ≈ 1 + 0.002·from ms.
	want := int((bound.Seconds() - fixed - perToken*8 - perAttn*800) / (perToken + perAttn*float64(from)))
	if last > want+2 {
		t.Errorf("last chunk %d from position %d, want at most about %d", last, from, want)
	}
}

// TestPacerSpread: steps whose times scatter ±20% around the same model
// get smaller chunks, so that the slow ones too stay under the bound.
func TestPacerSpread(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	var steady, noisy pacer
	for i := range 200 {
		n := []int{8, 40, 8, 72, 24}[i%5]
		d := 10*ms + time.Duration(n)*ms
		steady.observe(stepShape{tokens: n}, d)
		f := []float64{0.8, 1.2}[i%2]
		noisy.observe(stepShape{tokens: n}, time.Duration(float64(d)*f))
	}
	a := steady.chunk(100*ms, stepShape{tokens: 8}, 0, 16, 256)
	b := noisy.chunk(100*ms, stepShape{tokens: 8}, 0, 16, 256)
	m, _ := noisy.model()
	t.Logf("chunks: steady %d, ±20%% %d (spread %.1f ms)", a, b, noisy.spread(m)*1e3)
	// The slow steps take 1.2× the model: (b + 8 + 10)·1.2 ≤ 100.
	if b >= a || float64(b+8+10)*1.2 > 100 {
		t.Errorf("chunk of %d under ±20%% spread (steady: %d): a step 1.2× slower than the model is over the 100 ms bound", b, a)
	}
}

// TestAdmitWhenPrefillStarts: a burst sharing a prefix, queued at once
// (the seed's shared-system-prompt burst). The later jobs wait for the
// first one's prefill of the shared blocks, and are then admitted as the
// step's prefill budget can start their own tails, not all at once: each
// gets its first token within the steps its own tail takes, fewer than the
// first job's, where admitting all nine at once had the last wait for the
// eight tails before it.
func TestAdmitWhenPrefillStarts(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	const n, prefix, budget = 10, 100, 32 // six full shared blocks, then 4 + 20 tokens each
	var jobs []job
	for _, p := range sharedPrompts(n, prefix, 20, 5) {
		jobs = append(jobs, job{prompt: p, max: 12, opts: JobOpts{Class: 1}})
	}
	want := alone(t, l, jobs)
	// No pacing: the budget is 32 tokens a step whatever the steps take.
	s := newQueued(t, l, Config{MaxBatchTokens: budget, MaxStepLatency: -1, NoDrafts: true})
	outs := startQueued(t, s, jobs, func(jobs []job) []outcome { return run(s, jobs) })
	sameAsAlone(t, outs, want, 0)
	var first int64
	for _, o := range outs {
		if o.stats.CachedInputTokens == 0 {
			first = o.stats.FirstTokenSteps
		}
	}
	for i, o := range outs {
		t.Logf("job %d: %d cached, queued %d steps, first token after %d", i, o.stats.CachedInputTokens, o.stats.QueueSteps, o.stats.FirstTokenSteps)
		// An attached job computes 24 tokens: at most two steps.
		if o.stats.CachedInputTokens > 0 && (o.stats.FirstTokenSteps > 2 || o.stats.FirstTokenSteps >= first) {
			t.Errorf("job %d: first token %d steps after admission, want at most 2 and fewer than the first job's %d", i, o.stats.FirstTokenSteps, first)
		}
	}
	sharedOnce(t, s, n-1, n-1)
}
