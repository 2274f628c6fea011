package sched

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// loadFile loads a GGUF model on a one-thread CPU backend.
func loadFile(t testing.TB, f *gguf.File) *engine.Loaded {
	t.Helper()
	be := cpu.New(cpu.Config{Threads: 1})
	t.Cleanup(func() { be.Close() })
	l, err := engine.FromFile(f, be)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// watchPages checks, after every step, that each running sequence's
// tables and block counts agree, that no sequence holds more than pagesAt
// allows, and the block manager's accounting; it records the most
// sequences decoding in one step (each job its own tenant) and the most
// blocks one sequence held.
func watchPages(t *testing.T, s *Scheduler) (maxDecoding, maxHeld *int) {
	maxDecoding, maxHeld = new(int), new(int)
	failed := false
	s.stepTokens = func(got map[string]int) {
		*maxDecoding = max(*maxDecoding, len(got))
		for _, q := range s.running {
			n := 0
			q.eachPage(func(int32) { n++ })
			if err := s.checkTables(q); err != nil && !failed {
				failed = true
				t.Error(err)
			}
			bound := s.pagesAt(len(q.g.Tokens()), true)
			if (n != q.held || q.held > bound) && !failed {
				failed = true
				t.Errorf("a sequence of %d tokens (%d computed) holds %d blocks, counts %d, bound %d", len(q.g.Tokens()), q.computed, n, q.held, bound)
			}
			*maxHeld = max(*maxHeld, q.held)
		}
		if err := s.bm.check(); err != nil && !failed {
			failed = true
			t.Error(err)
		}
	}
	return maxDecoding, maxHeld
}

// TestWindowedPagesReference runs shared/models/archs' gemma3 (six local
// layers with window 8, one global) through the scheduler with 4-token
// blocks, so the local layers' blocks are given back from the third
// block on, and compares every case with llama.cpp's greedy ids: all five
// at once with 7-token prefill chunks; in an arena too small for them,
// preempted to the host tier; the same without a host tier (recompute);
// and in the whole-block layout. Every run must give llama.cpp's ids and
// the same ids as the others, leave no block held, and (apart from the
// whole-block run) hold fewer blocks than every layer at every position
// would take.
func TestWindowedPagesReference(t *testing.T) {
	path := modeltest.SharedPath(t, "models/archs/gemma3-s-f32.gguf")
	refs := modeltest.ReadArchCases(t, modeltest.SharedPath(t, "models/archs/ref-gemma3-s-f32.txt"))
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := loadFile(t, f)
	layout := l.Model.KVLayout()
	if len(layout.Groups) != 7 || layout.GroupLayers != 1 || layout.Window() != 8 {
		t.Fatalf("gemma3-s (7 layers, layer 5 global, window 8): layout %+v", layout)
	}
	const steps, tol = 40, 1.5e-3
	upTo := make([]int, len(refs))
	for i, ref := range refs {
		upTo[i] = len(ref.IDs)
		for j, mg := range ref.Margins {
			if mg < 2*tol {
				upTo[i] = j
				break
			}
		}
	}
	// Queued in order before the loop starts, no pacing, no aging, and
	// drafts at a fixed threshold or none (a measured one follows the
	// step times): the steps, and so the preemptions, do not depend on
	// timing.
	base := Config{BlockTokens: 4, MaxBatchTokens: 7, HostSwapBlocks: 1024, MaxStepLatency: -1, NoDrafts: true, AgingAfter: time.Hour}
	cases := []struct {
		name string
		cfg  Config
	}{
		{"batched", base},
		// 60 blocks: the longest case holds 46-48; two collide. (Before
		// the filler left the running jobs room for their whole
		// generations, 150 collided through it.)
		{"swap", func() Config { c := base; c.KVBlocks = 60; return c }()},
		{"recompute", func() Config { c := base; c.KVBlocks = 60; c.HostSwapMB = -1; return c }()},
		{"whole", func() Config { c := base; c.WholeBlocks = true; return c }()},
		// Drafts fed whenever proposed: their rows write K and V past
		// what is kept, and windowed groups give blocks back as accepted
		// drafts move the sequence on.
		{"drafts", func() Config { c := base; c.NoDrafts, c.DraftThreshold = false, 0.01; return c }()},
		{"drafts swap", func() Config { c := base; c.KVBlocks = 60; c.NoDrafts, c.DraftThreshold = false, 0.01; return c }()},
	}
	var first [][]int32
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newQueued(t, l, tc.cfg)
			_, maxHeld := watchPages(t, s)
			jobs := make([]job, len(refs))
			for i, ref := range refs {
				jobs[i] = job{prompt: ref.Prompt, max: steps, opts: JobOpts{Tenant: fmt.Sprint(i)}}
			}
			outs := queueInOrder(t, s, jobs)
			var ids [][]int32
			preempted, drafted := 0, 0
			for i, o := range outs {
				drafted += o.stats.DraftedTokens
				if o.err != nil {
					t.Fatalf("case %d: %v", i, o.err)
				}
				got := o.res.OutputIDs
				if len(got) != steps {
					t.Fatalf("case %d: %d tokens, want %d", i, len(got), steps)
				}
				if !slices.Equal(got[:upTo[i]], refs[i].IDs[:upTo[i]]) {
					t.Errorf("case %d: ids differ from llama.cpp's up to step %d\n got  %v\n want %v", i, upTo[i], got[:upTo[i]], refs[i].IDs[:upTo[i]])
				}
				ids = append(ids, got)
				preempted += o.stats.Preemptions
			}
			if first == nil {
				first = ids
			} else {
				for i := range ids {
					if !slices.Equal(ids[i], first[i]) {
						t.Errorf("case %d: ids differ from the batched run's\n got  %v\n want %v", i, ids[i], first[i])
					}
				}
			}
			if tc.cfg.KVBlocks > 0 && preempted == 0 {
				t.Errorf("an arena of %d blocks preempted nothing", tc.cfg.KVBlocks)
			}
			// The longest case: 70 prompt and 40 new tokens, 28 blocks of
			// 4 positions, in 7 groups.
			whole := 7 * 28
			if tc.cfg.WholeBlocks {
				if *maxHeld > 28 {
					t.Errorf("whole blocks: a sequence held %d blocks of every layer, at most 28", *maxHeld)
				}
			} else if *maxHeld >= whole/2 {
				t.Errorf("a sequence held %d one-layer blocks; every layer at every position takes %d, and the window should leave under half", *maxHeld, whole)
			}
			if tc.cfg.KVBlocks == 0 {
				// The longest prompt again: its 17 full blocks come from the
				// prefix cache (the local groups' only within the window of
				// position 68), and it generates the same.
				last := len(refs) - 1
				o := runIgnoringEOS(s, jobs[last:])[0]
				if o.err != nil {
					t.Fatal(o.err)
				}
				if o.stats.CachedInputTokens != 68 || !slices.Equal(o.res.OutputIDs, ids[last]) {
					t.Errorf("case %d again: %d cached tokens (want 68), ids %v, first time %v", last, o.stats.CachedInputTokens, o.res.OutputIDs, ids[last])
				}
			}
			t.Logf("%s: most blocks held by one sequence %d, preemptions %d, draft tokens %d", tc.name, *maxHeld, preempted, drafted)
			if tc.cfg.DraftThreshold > 0 && drafted == 0 {
				t.Error("nothing drafted")
			}
			checkIdle(t, s)
		})
	}
}

// runIgnoringEOS is run with every job generating its max tokens.
func runIgnoringEOS(s *Scheduler, jobs []job) []outcome {
	out := make([]outcome, len(jobs))
	done := make(chan int)
	for i, j := range jobs {
		go func() {
			res, stats, err := s.Generate(context.Background(), &engine.Request{PromptIDs: j.prompt, MaxTokens: j.max, IgnoreEOS: true}, j.opts)
			out[i] = outcome{res, stats, err}
			done <- i
		}()
	}
	for range jobs {
		<-done
	}
	return out
}

// queueInOrder submits jobs to a scheduler not started yet, one after
// the other (so the queue holds them in order), then starts it and
// returns their outcomes, each job generating its max tokens.
func queueInOrder(t *testing.T, s *Scheduler, jobs []job) []outcome {
	t.Helper()
	out := make([]outcome, len(jobs))
	done := make(chan struct{}, len(jobs))
	for i, j := range jobs {
		go func() {
			res, stats, err := s.Generate(context.Background(), &engine.Request{PromptIDs: j.prompt, MaxTokens: j.max, IgnoreEOS: true}, j.opts)
			out[i] = outcome{res, stats, err}
			done <- struct{}{}
		}()
		waitFor(t, 10*time.Second, "the job queued", func() bool { return len(s.submit) == i+1 })
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range jobs {
		<-done
	}
	return out
}

// TestWindowedAdmitsMore gives a gemma3-shaped model (five local layers
// with window 32 and one global) the same KV memory in both layouts and
// eight jobs of 300-token prompts: the windowed layout holds a job in
// fewer bytes, so it decodes more jobs at once than the whole-block one,
// and the jobs generate the same tokens either way.
func TestWindowedAdmitsMore(t *testing.T) {
	c := synth.Config{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 6, Heads: 2, KVHeads: 1, HeadDim: 32,
		Window: 32, Vocab: 300, Context: 1024, Type: gpu.F32, Tied: true, Seed: 7}
	l := loadFile(t, modeltest.Build(t, c))
	prompts := make([][]int32, 8)
	for i := range prompts {
		p := make([]int32, 300)
		for j := range p {
			p[j] = int32(3 + (i*131+j*17)%290)
		}
		prompts[i] = p
	}
	// 42 blocks of every layer, or 252 of one: the same bytes.
	layouts := []struct {
		name string
		cfg  Config
	}{
		{"whole", Config{WholeBlocks: true, KVBlocks: 42, MaxBatchTokens: 64, HostSwapMB: -1, MaxStepLatency: -1, NoDrafts: true, AgingAfter: time.Hour}},
		{"windowed", Config{KVBlocks: 252, MaxBatchTokens: 64, HostSwapMB: -1, MaxStepLatency: -1, NoDrafts: true, AgingAfter: time.Hour}},
	}
	var conc [2]int
	var ids [2][][]int32
	for k, lay := range layouts {
		s := newQueued(t, l, lay.cfg)
		elem, _ := l.Model.KVType().RowBytes(1) // bytes per cached value
		if got := s.BlockBytes() * int64(s.Blocks()); got != 42*6*16*2*32*int64(elem) {
			t.Fatalf("%s: an arena of %d bytes", lay.name, got)
		}
		maxDecoding, _ := watchPages(t, s)
		jobs := make([]job, len(prompts))
		for i, p := range prompts {
			jobs[i] = job{prompt: p, max: 16, opts: JobOpts{Tenant: fmt.Sprint(i)}}
		}
		began := time.Now()
		for i, o := range queueInOrder(t, s, jobs) {
			if o.err != nil {
				t.Fatalf("%s: job %d: %v", lay.name, i, o.err)
			}
			ids[k] = append(ids[k], o.res.OutputIDs)
		}
		conc[k] = *maxDecoding
		t.Logf("%s: %d blocks of %d bytes; at most %d jobs decoding in one step; %v", lay.name, s.Blocks(), s.BlockBytes(), conc[k], time.Since(began).Round(time.Millisecond))
		checkIdle(t, s)
	}
	if conc[1] <= conc[0] {
		t.Errorf("the windowed layout decoded at most %d jobs at once, the whole-block one %d: windows should admit more", conc[1], conc[0])
	}
	for i := range ids[0] {
		if !slices.Equal(ids[0][i], ids[1][i]) {
			t.Errorf("job %d: windowed %v, whole blocks %v", i, ids[1][i], ids[0][i])
		}
	}
}

// checkTables verifies q's tables: all of one length, the global groups'
// entries all held, the windowed groups' held from q.lo on and −1 before.
func (s *Scheduler) checkTables(q *seq) error {
	L := q.logical()
	for g, t := range q.tables {
		if len(t) != L {
			return fmt.Errorf("group %d's table has %d blocks, group 0's %d", g, len(t), L)
		}
		for i, b := range t {
			if want := !s.pg.local[g] || i >= q.lo; (b >= 0) != want {
				return fmt.Errorf("group %d (local %v) block %d is %d with lo %d (of %d)", g, s.pg.local[g], i, b, q.lo, L)
			}
		}
	}
	return nil
}

// TestWindowedUnderPressure runs many jobs of mixed lengths past the
// window on a gemma3-shaped model in an arena far too small for them, with
// a host tier: jobs are preempted, swapped out and in (with tables that
// hold −1 where blocks were given back) and recomputed, while the tables
// are checked after every step. Every job must generate what it generates
// alone.
func TestWindowedUnderPressure(t *testing.T) {
	c := synth.Config{Arch: "gemma3", Dim: 64, Hidden: 128, Layers: 6, Heads: 2, KVHeads: 1, HeadDim: 32,
		Window: 32, Vocab: 300, Context: 1024, Type: gpu.F32, Tied: true, Seed: 11}
	l := loadFile(t, modeltest.Build(t, c))
	jobs := make([]job, 16)
	for i := range jobs {
		p := make([]int32, 40+i*23)
		for j := range p {
			p[j] = int32(3 + (i*71+j*13)%290)
		}
		jobs[i] = job{prompt: p, max: 24 + 8*(i%5), opts: JobOpts{Tenant: fmt.Sprint(i % 3), Class: i % 2}}
	}
	alone := newSched(t, l, Config{MaxBatchTokens: 64})
	want := runIgnoringEOS(alone, jobs)
	// Every job queued before the loop starts, no pacing and no aging:
	// the steps do not depend on timing, so neither do the preemptions.
	base := Config{MaxBatchTokens: 64, MaxStepLatency: -1, NoDrafts: true, AgingAfter: time.Hour}
	for _, c := range []Config{
		{KVBlocks: 120, HostSwapBlocks: 400, RunQuantum: 1},
		{KVBlocks: 80, HostSwapBlocks: 400, RunQuantum: 1},
		{KVBlocks: 120, HostSwapBlocks: 60},
		{KVBlocks: 120, HostSwapMB: -1},
	} {
		cfg := base
		cfg.KVBlocks, cfg.HostSwapBlocks, cfg.HostSwapMB, cfg.RunQuantum = c.KVBlocks, c.HostSwapBlocks, c.HostSwapMB, c.RunQuantum
		s := newQueued(t, l, cfg)
		watchPages(t, s)
		preempted := 0
		for i, o := range queueInOrder(t, s, jobs) {
			if o.err != nil {
				t.Fatalf("job %d: %v", i, o.err)
			}
			if !slices.Equal(o.res.OutputIDs, want[i].res.OutputIDs) {
				t.Errorf("job %d: %v, alone %v", i, o.res.OutputIDs, want[i].res.OutputIDs)
			}
			preempted += o.stats.Preemptions
		}
		if preempted == 0 {
			t.Errorf("%+v: nothing was preempted", cfg)
		}
		t.Logf("host tier %d blocks: %d preemptions", cfg.HostSwapBlocks, preempted)
		checkIdle(t, s)
	}
}
