package sched

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// pressureJobs are issue 12's arena-pressure workloads scaled to
// stories260K (16-token blocks): n greedy jobs whose prompts are cut to
// promptLen tokens, each generating up to newTokens.
func pressureJobs(t testing.TB, n, promptLen, newTokens int) []job {
	r := rand.New(rand.NewPCG(12, 3))
	var jobs []job
	long := reference(t)[5].PromptIDs[1:]
	for _, p := range prompts(t, n, r) {
		for len(p) < promptLen {
			p = append(p, long...)
		}
		jobs = append(jobs, job{prompt: p[:promptLen], max: newTokens})
	}
	return jobs
}

// figures are one run's preemption figures.
type figures struct {
	preemptions, recomputed, generated int
	took                               time.Duration
}

func (f figures) perToken() float64 { return float64(f.preemptions) / float64(f.generated) }

// runPressure runs jobs through s, checks that every one is served with
// the greedy output it has alone, and returns the figures.
func runPressure(t *testing.T, s *Scheduler, jobs []job, want [][]int32) figures {
	t.Helper()
	t0 := time.Now()
	outs := run(s, jobs)
	f := figures{took: time.Since(t0)}
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("job %d: %v", i, o.err)
		}
		if !slices.Equal(o.res.OutputIDs, want[i]) {
			t.Errorf("job %d: %v\nalone:  %v", i, o.res.OutputIDs, want[i])
		}
		f.preemptions += o.stats.Preemptions
		f.recomputed += o.stats.RecomputedTokens
		f.generated += len(o.res.OutputIDs)
	}
	t.Logf("%d jobs: %d preemptions (%.4f per generated token), %d recomputed tokens, %d generated, %.0f tok/s, %d steps, %d evictions without progress",
		len(jobs), f.preemptions, f.perToken(), f.recomputed, f.generated, float64(f.generated)/f.took.Seconds(), s.stepCount.Load(), s.noProgress.Load())
	return f
}

// TestArenaPressure is issue 12's two thrashing scenarios: 30 jobs of 9
// blocks worst case in a 21-block arena (the host tier takes every
// victim), and 8 jobs of 10 blocks in 21 blocks with a 7-block host tier
// (victims that do not fit recompute). Preemptions stay under 0.01 per
// generated token, no resumed job is evicted before it has generated a
// token, and outputs match running alone.
func TestArenaPressure(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	for _, tc := range []struct {
		name string
		cfg  Config
		jobs []job
	}{
		// Worst case 31 + 113 = 144 tokens: 9 blocks.
		{"swap", Config{KVBlocks: 21, MaxBatchTokens: 64}, pressureJobs(t, 30, 31, 113)},
		// 31 + 120 = 151 tokens: 10 blocks, more than the tier holds.
		{"recompute", Config{KVBlocks: 21, MaxBatchTokens: 64, HostSwapBlocks: 7}, pressureJobs(t, 8, 31, 120)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := alone(t, l, tc.jobs)
			s := newSched(t, l, tc.cfg)
			f := runPressure(t, s, tc.jobs, want)
			// The target is 0.01 a token (typically 0.005 here); the test
			// allows twice that, as the jobs' arrival order varies with the
			// machine's load. The code before this bound thrashed at
			// 0.024–0.052 on these scenarios.
			if f.perToken() > 0.02 {
				t.Errorf("%d preemptions for %d tokens: %.4f a token, want at most 0.02", f.preemptions, f.generated, f.perToken())
			}
			if n := s.noProgress.Load(); n != 0 {
				t.Errorf("%d evictions of a resumed job that had generated nothing since", n)
			}
			checkIdle(t, s)
		})
	}
}

// TestNoPreemptionWithRoom: with memory to spare and more jobs than
// batch slots, jobs that wait long enough to age into a higher class must
// not evict the running jobs of their own class (issue 12's 624 swaps in
// a mostly empty arena).
func TestNoPreemptionWithRoom(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newSched(t, l, Config{MaxRunning: 4, AgingAfter: 10 * time.Millisecond})
	jobs := pressureJobs(t, 24, 20, 60)
	for i := range jobs {
		jobs[i].opts = JobOpts{Class: 1, Tenant: "one"}
	}
	pre := 0
	for i, o := range run(s, jobs) {
		if o.err != nil {
			t.Fatalf("job %d: %v", i, o.err)
		}
		pre += o.stats.Preemptions
	}
	t.Logf("%d preemptions, %d of %d blocks in use at most", pre, 4*5, s.Blocks())
	if pre != 0 {
		t.Errorf("%d preemptions with the arena nearly empty", pre)
	}
	checkIdle(t, s)
}

// TestReservedNotCrowdedOut: a low_latency job arriving while ordinary
// jobs of its class fill the arena is admitted within a step (taking the
// room of preemptible jobs), and is never preempted.
func TestReservedNotCrowdedOut(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newSched(t, l, Config{KVBlocks: 21, MaxBatchTokens: 64})
	// Enough of them that the arena stays full while the test looks.
	jobs := pressureJobs(t, 160, 31, 113)
	done := make(chan []outcome)
	go func() { done <- run(s, jobs) }()
	// The ordinary jobs fill the arena (or as much of it as admission
	// lets them); on a loaded machine the window can be missed, and the
	// checks below still hold, so the wait is not itself a check.
	full := false
	for deadline := time.Now().Add(10 * time.Second); !full && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		full = s.snapAvail.Load() <= 2 || s.snapRunning.Load() >= 1 && s.snapWaiting() >= 1
	}
	t.Logf("arena seen full before the low_latency job: %v", full)
	ll := pressureJobs(t, 1, 20, 100)[0]
	ll.opts = JobOpts{LowLatency: true}
	o := run(s, []job{ll})[0]
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("low_latency job: queued %.2f ms, %d steps", o.stats.QueueMs, o.stats.QueueSteps)
	if o.stats.QueueSteps > 2 || o.stats.Preemptions != 0 {
		t.Errorf("low_latency job waited %d steps, preempted %d times", o.stats.QueueSteps, o.stats.Preemptions)
	}
	for i, o := range <-done {
		if o.err != nil {
			t.Fatalf("job %d: %v", i, o.err)
		}
	}
	checkIdle(t, s)
}

// TestReservedOverCap: the banker's rule refuses at admission a
// low_latency job whose worst case exceeds its own max_memory_mb, rather
// than admitting it to stop at the cap; an ordinary job under the same cap
// is admitted and stops with memory_limit.
func TestReservedOverCap(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newSched(t, l, Config{})
	capMB := 3 * float64(s.BlockBytes()) / (1 << 20)
	p := reference(t)[0].PromptIDs
	for _, tc := range []struct {
		name    string
		opts    JobOpts
		max     int
		wantErr error
		stop    string
	}{
		{"low_latency over its cap", JobOpts{LowLatency: true, MaxMemoryMB: capMB}, 200, ErrTooLarge, ""},
		{"not preemptible over its cap", JobOpts{NotPreemptible: true, MaxMemoryMB: capMB}, 200, ErrTooLarge, ""},
		{"low_latency within its cap", JobOpts{LowLatency: true, MaxMemoryMB: capMB}, 3*16 - len(p), nil, engine.StopMaxTokens},
		{"ordinary over its cap", JobOpts{MaxMemoryMB: capMB}, 200, nil, engine.StopMemoryLimit},
	} {
		o := run(s, []job{{prompt: p, max: tc.max, opts: tc.opts}})[0]
		if !errors.Is(o.err, tc.wantErr) {
			t.Errorf("%s: error %v, want %v", tc.name, o.err, tc.wantErr)
			continue
		}
		if o.err == nil && o.res.StopReason != tc.stop {
			t.Errorf("%s: stopped with %s, want %s", tc.name, o.res.StopReason, tc.stop)
		}
	}
	checkIdle(t, s)
}

// TestSafeFloor: the free blocks the banker's rule keeps for reserved jobs
// is the least with which they can all finish one after another, not the
// sum of what they may still allocate.
func TestSafeFloor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims []claim
		want   int
	}{
		{"none", nil, 0},
		{"one", []claim{{need: 7, release: 2}}, 7},
		// The one about to finish lends its 9 blocks to the others.
		{"one near its end", []claim{{need: 6, release: 3}, {need: 0, release: 9}, {need: 3, release: 6}}, 0},
		// Three fresh 9-block jobs with 2-block prompts: the first needs 7,
		// and each then hands 2 more to the next.
		{"three fresh", []claim{{need: 7, release: 2}, {need: 7, release: 2}, {need: 7, release: 2}}, 7},
		{"order matters", []claim{{need: 10, release: 1}, {need: 2, release: 8}}, 2},
	} {
		if got := safeFloor(slices.Clone(tc.claims)); got != tc.want {
			t.Errorf("%s: safeFloor = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestReservedPeak: three low_latency jobs whose worst cases (9 blocks
// each) together exceed a 21-block arena. Reserving every worst case in
// full kept the third waiting until the first ended; now it is admitted
// as soon as the arena holds the peak of the three's use, the first two's
// blocks coming back as the third grows into them. None is preempted,
// none sits out a step for want of a block, and each output is the one it
// has alone.
func TestReservedPeak(t *testing.T) {
	// Not parallel: what it counts depends on when jobs land and on
	// measured step times, which other tests' load moves.
	l := modeltest.LoadStories(t, 1)
	// Worst case 31 + 113 = 144 tokens: 9 blocks.
	jobs := pressureJobs(t, 3, 31, 113)
	for i := range jobs {
		jobs[i].opts = JobOpts{LowLatency: true}
	}
	want := alone(t, l, jobs)
	s := newSched(t, l, Config{KVBlocks: 21, MaxBatchTokens: 64})
	for i, o := range run(s, jobs) {
		if o.err != nil {
			t.Fatalf("job %d: %v", i, o.err)
		}
		if !slices.Equal(o.res.OutputIDs, want[i]) {
			t.Errorf("job %d: %v\nalone:  %v", i, o.res.OutputIDs, want[i])
		}
		t.Logf("job %d: queued %d steps, %d tokens", i, o.stats.QueueSteps, len(o.res.OutputIDs))
		// The third job fits at step 95 of the first two (⌈(31 + t) ÷ 16⌉
		// blocks at step t: 2 × 9 + 3 ≤ 21 at their last step); they end
		// at step 113.
		if o.stats.QueueSteps >= 113 || o.stats.Preemptions != 0 {
			t.Errorf("job %d queued %d steps (the others end after 113) and was preempted %d times", i, o.stats.QueueSteps, o.stats.Preemptions)
		}
	}
	if n := s.reservedWaits.Load(); n != 0 {
		t.Errorf("reserved jobs sat out %d steps for want of a block", n)
	}
	checkIdle(t, s)
}

// TestReservedSafeState: admission's peak counts on a prompt taking
// ⌈prompt ÷ MaxBatchTokens⌉ steps; here a step latency bound no step
// meets cuts prefill chunks beside decodes to 2 tokens, so a 200-token
// prompt (a 13-block job that the peak has ending soon) holds its blocks
// four times longer, while two 9-block jobs grow into the blocks it was
// to give back (23 blocks for 31). They must sit out steps rather than take a block that another
// reserved job needs to finish (the banker's rule). All three finish with
// their outputs alone, none is preempted, and the arena never runs dry.
func TestReservedSafeState(t *testing.T) {
	// Not parallel: what it counts depends on when jobs land and on
	// measured step times, which other tests' load moves.
	l := modeltest.LoadStories(t, 1)
	jobs := append(pressureJobs(t, 2, 31, 113), pressureJobs(t, 1, 200, 8)...)
	for i := range jobs {
		jobs[i].opts = JobOpts{LowLatency: true}
	}
	want := alone(t, l, jobs)
	s, err := New(l.Model, l.Tokenizer, Config{KVBlocks: 23, MaxBatchTokens: 8, MaxStepLatency: time.Nanosecond, MinPrefillTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, s)
	// The long one comes once the others decode (alone it would prefill
	// in full chunks), and early enough for the peak to admit it at once:
	// the second 31-token prompt goes in 2-token chunks beside the first
	// one's decodes, from step 4 to about 19. The first job's 17th token
	// (about step 21) sends it, and holds that step until it is in the
	// scheduler's inbox: when it arrives does not depend on how soon the
	// test's goroutines run on a loaded machine.
	long := make(chan []outcome, 1)
	tokens := 0
	jobs[0].onToken = func(engine.Token) error {
		if tokens++; tokens == 17 {
			go func() { long <- run(s, jobs[2:]) }()
			for len(s.submit) == 0 {
				runtime.Gosched()
			}
		}
		return nil
	}
	// The first two are both in the inbox when the loop starts.
	first := make(chan []outcome, 1)
	go func() { first <- run(s, jobs[:2]) }()
	for len(s.submit) < 2 {
		runtime.Gosched()
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	outs := append(<-first, <-long...)
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("job %d: %v", i, o.err)
		}
		if !slices.Equal(o.res.OutputIDs, want[i]) {
			t.Errorf("job %d: %v\nalone:  %v", i, o.res.OutputIDs, want[i])
		}
		if o.stats.Preemptions != 0 {
			t.Errorf("reserved job %d was preempted %d times", i, o.stats.Preemptions)
		}
		t.Logf("job %d: queued %d steps, %d tokens", i, o.stats.QueueSteps, len(o.res.OutputIDs))
	}
	t.Logf("%d steps sat out by a reserved job, %d steps in all", s.reservedWaits.Load(), s.stepCount.Load())
	if s.reservedWaits.Load() == 0 {
		t.Errorf("no reserved job sat out a step: the test no longer puts the jobs out of step")
	}
	checkIdle(t, s)
}

// documentJobs are issue 37's documents scaled to stories260K (a context
// of 2,048): n greedy jobs with prompts of lo to hi tokens that share no
// prefix, each generating max tokens (stories260K runs on to max_tokens
// after such prompts, as a random-weight model does).
func documentJobs(n, lo, hi, max int) []job {
	r := rand.New(rand.NewPCG(37, 1))
	var jobs []job
	for range n {
		p := []int32{1}
		for L := lo + r.IntN(hi-lo+1); len(p) < L; {
			p = append(p, int32(3+r.IntN(509)))
		}
		jobs = append(jobs, job{prompt: p, max: max})
	}
	return jobs
}

// runAtMost runs jobs through s with at most n of them submitted and not
// finished at a time, in order, as a client of n connections does.
func runAtMost(s *Scheduler, jobs []job, n int) []outcome {
	out := make([]outcome, len(jobs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = run(s, jobs[i:i+1])[0]
		}()
	}
	wg.Wait()
	return out
}

// TestLongPromptsQueue is issue 37: documents whose prompts are long
// beside the arena, arriving together, more of them than the arena holds.
// They must queue and run in turn, not thrash: every job is evicted for
// memory at most once (a job evicted comes back with room for its whole
// generation), none is evicted without progress, with a host tier none
// recomputes a token, and the work of the burst at 8 at a time, in steps
// and in tokens computed, is no more than at 2 at a time (with slack for
// when the second client's jobs land), so documents an hour do not fall
// with concurrency. Outputs are those of each job alone.
func TestLongPromptsQueue(t *testing.T) {
	// Not parallel: what it counts depends on when jobs land and on
	// measured step times, which other tests' load moves.
	l := modeltest.LoadStories(t, 1)
	// 24 to 32 blocks each at their end (250 to 380 prompt tokens and
	// 130 generated) in 80 blocks: two or three fit whole.
	jobs := documentJobs(10, 250, 380, 130)
	want := alone(t, l, jobs)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"swap", Config{KVBlocks: 80, HostSwapBlocks: 80, MaxBatchTokens: 64}},
		{"recompute", Config{KVBlocks: 80, HostSwapMB: -1, MaxBatchTokens: 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type work struct{ steps, computed, preemptions, recomputed int64 }
			var at [2]work
			for k, n := range []int{8, 2} {
				s := newSched(t, l, tc.cfg)
				outs := runAtMost(s, jobs, n)
				sameAsAlone(t, outs, want, 0)
				w := &at[k]
				for i, o := range outs {
					w.preemptions += int64(o.stats.Preemptions)
					w.recomputed += int64(o.stats.RecomputedTokens)
					w.computed += int64(len(jobs[i].prompt) + len(o.res.OutputIDs) + o.stats.RecomputedTokens)
					if o.stats.Preemptions > 1 {
						t.Errorf("%d at a time: job %d (%d prompt tokens) was preempted %d times", n, i, len(jobs[i].prompt), o.stats.Preemptions)
					}
				}
				w.steps = s.stepCount.Load()
				t.Logf("%d at a time: %d steps, %d tokens computed, %d preemptions, %d recomputed, %d fillers, most %d in a step",
					n, w.steps, w.computed, w.preemptions, w.recomputed, s.fillers.Load(), s.MostInStep())
				if np := s.noProgress.Load(); np != 0 {
					t.Errorf("%d at a time: %d evictions of a resumed job that had generated nothing since", n, np)
				}
				if tc.cfg.HostSwapMB >= 0 && w.recomputed != 0 {
					t.Errorf("%d at a time: %d tokens recomputed with a host tier that holds every victim", n, w.recomputed)
				}
				checkIdle(t, s)
			}
			// Without a host tier a victim recomputes its context (once:
			// 0–380 tokens here, by when the jobs land: 2 to 4 victims,
			// 100 to 1,100 tokens recomputed over runs); the code before
			// issue 37 computed 20% more than at 2 at a time, and had
			// jobs evicted up to 6 times, which the at-most-once check
			// above catches.
			slack := int64(10)
			if tc.cfg.HostSwapMB < 0 {
				slack = 30
			}
			if at[0].steps > at[1].steps*11/10 || at[0].computed > at[1].computed*(100+slack)/100 {
				t.Errorf("8 at a time took %d steps and %d tokens computed, 2 at a time %d and %d", at[0].steps, at[0].computed, at[1].steps, at[1].computed)
			}
		})
	}
}

// TestArenaIsTheCap: a job whose prompt fits the arena but whose
// generation would outgrow it stops with memory_limit when it fills the
// arena, generating what it does alone up to there (issue 37: it evicted
// itself at its next block, came back and did it again, until its
// deadline); one whose prompt can never fit is refused at once.
func TestArenaIsTheCap(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	long := documentJobs(1, 100, 100, 200)
	want := alone(t, l, long)[0]
	long[0].cancel = time.Minute // not to hang where it would evict itself forever
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"swap", Config{KVBlocks: 10}},
		{"recompute", Config{KVBlocks: 10, HostSwapMB: -1}},
	} {
		s := newSched(t, l, tc.cfg)
		o := run(s, long)[0]
		// 160 positions hold the 100 prompt tokens and 60 fed back; the
		// 61st generated token is sampled but needs no slot.
		if o.err != nil || o.res.StopReason != engine.StopMemoryLimit || !slices.Equal(o.res.OutputIDs, want[:10*16-100+1]) {
			t.Fatalf("%s: %v, %+v", tc.name, o.err, o.res)
		}
		if o.stats.Preemptions != 0 {
			t.Errorf("%s: the job was preempted %d times", tc.name, o.stats.Preemptions)
		}
		big := documentJobs(1, 170, 170, 10)
		if o := run(s, big)[0]; !errors.Is(o.err, ErrTooLarge) {
			t.Errorf("%s: a prompt over the arena: %v, want ErrTooLarge", tc.name, o.err)
		}
		checkIdle(t, s)
	}
}

// TestDefaultArena: with neither KVMemoryMB nor KVBlocks the arena is
// engine.DefaultKVArena's for the model and the machine (for
// stories260K, whose 4 contexts are a few MB, the 256 MB floor), and it
// holds the model's whole context; a configured one says so.
func TestDefaultArena(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newQueued(t, l, Config{})
	a := s.KVArena()
	full := s.pagesAt(l.Model.Context, true)
	want := engine.DefaultKVArena(s.BlockBytes(), full, l.Model.Context, engine.ReadMemory())
	if a != want || s.Blocks() != a.Blocks || a.Bytes < engine.DefaultKVMemoryMB<<20-s.BlockBytes() || a.Blocks < full {
		t.Errorf("default arena %+v (%d blocks), want %+v holding %d blocks a context", a, s.Blocks(), want, full)
	}
	t.Log(a)
	c := newQueued(t, l, Config{KVBlocks: full / 2}).KVArena()
	if c.Blocks != full/2 || !strings.HasSuffix(c.Why, "as configured") {
		t.Errorf("configured arena %+v", c)
	}
}
