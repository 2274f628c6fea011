package sched

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// TestEmbedThroughScheduler: embedding inputs run through a scheduler,
// chunked, packed into steps beside generations, preempted (swapped out,
// or dropped and recomputed), give the bits engine.Embed gives each input
// alone, for every pooling; and the generations beside them give the
// output they give alone.
//
// Not parallel: it loads the machine, and the reserved-admission tests
// beside it measure step times.
func TestEmbedThroughScheduler(t *testing.T) {
	l := modeltest.LoadStories(t, 1)
	r := rand.New(rand.NewPCG(3, 4))
	var inputs [][]int32
	for _, p := range prompts(t, 12, r) {
		// Long inputs too: several chunks of MaxBatchTokens 32.
		inputs = append(inputs, append(slices.Clone(p), p[1:]...))
	}
	var gens []job
	for _, p := range prompts(t, 6, r) {
		gens = append(gens, job{prompt: p, max: 60 + r.IntN(40)})
	}
	wantGen := alone(t, l, gens)
	alone := func(pool model.Pooling) [][]float32 {
		e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 64})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]float32
		for _, in := range inputs {
			v, err := e.Embed(context.Background(), [][]int32{in}, engine.EmbedOptions{Pooling: pool})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v[0])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"chunks beside generations", Config{MaxBatchTokens: 32}},
		{"swap out and in", Config{KVBlocks: 24, MaxBatchTokens: 32, HostSwapMB: 64, RunQuantum: 1}},
		{"drop and recompute", Config{KVBlocks: 24, MaxBatchTokens: 32, HostSwapMB: -1, RunQuantum: 1}},
	} {
		for _, pool := range []model.Pooling{model.PoolMean, model.PoolLast, model.PoolCLS} {
			want := alone(pool)
			s := newSched(t, l, tc.cfg)
			var wg sync.WaitGroup
			var gotGen []outcome
			wg.Add(1)
			go func() { defer wg.Done(); gotGen = run(s, gens) }()
			got := make([][][]float32, 3) // the inputs in three jobs of 4
			errs := make([]error, 3)
			var st [3]Stats
			for j := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[j], st[j], errs[j] = s.Embed(context.Background(), inputs[j*4:(j+1)*4], engine.EmbedOptions{Pooling: pool}, JobOpts{Tenant: "t", Class: 2})
				}()
			}
			wg.Wait()
			for j := range got {
				if errs[j] != nil {
					t.Fatalf("%s, %v: job %d: %v", tc.name, pool, j, errs[j])
				}
				if st[j].KVBytes <= 0 {
					t.Errorf("%s, %v: job %d: no KV bytes counted", tc.name, pool, j)
				}
				for i, v := range got[j] {
					w := want[j*4+i]
					if !slices.EqualFunc(v, w, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Fatalf("%s, %v: input %d: the scheduler's vector differs from the input's alone (first %v vs %v)", tc.name, pool, j*4+i, v[:3], w[:3])
					}
				}
			}
			for i, o := range gotGen {
				if o.err != nil || !slices.Equal(o.res.OutputIDs, wantGen[i]) {
					t.Fatalf("%s, %v: generation %d beside embeddings: %v, %v; alone %v", tc.name, pool, i, o.res, o.err, wantGen[i])
				}
			}
			if tc.cfg.KVBlocks > 0 && pool == model.PoolMean {
				var pre int
				for _, x := range st {
					pre += x.Preemptions
				}
				t.Logf("%s: %d embedding inputs preempted", tc.name, pre)
			}
		}
	}
}

// TestEmbedRefusals: an empty input, a token outside the vocabulary and an
// input over the context are refused; an input of the whole context runs.
func TestEmbedRefusals(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newSched(t, l, Config{})
	ctx := context.Background()
	for _, in := range [][]int32{{}, {1, int32(l.Model.Vocab)}, make([]int32, l.Model.Context+1)} {
		if _, _, err := s.Embed(ctx, [][]int32{{1, 2}, in}, engine.EmbedOptions{}, JobOpts{}); err == nil {
			t.Errorf("input of %d tokens: no error", len(in))
		}
	}
	full := make([]int32, l.Model.Context)
	for i := range full {
		full[i] = int32(1 + i%(l.Model.Vocab-1))
	}
	if v, _, err := s.Embed(ctx, [][]int32{full}, engine.EmbedOptions{}, JobOpts{}); err != nil || len(v[0]) != l.Model.Dim {
		t.Errorf("an input of the whole context (%d): %v", len(full), err)
	}
}

// TestEmbedEncoderThroughScheduler: an encoder's inputs (BERT, and
// gemma-embedding with its symmetric window and dense projections) run
// through a scheduler whole, each in one step (beside each other, longer
// than the prefill budget), with the bits engine.Embed gives each alone.
func TestEmbedEncoderThroughScheduler(t *testing.T) {
	for _, c := range []synth.Config{synth.BERTSmall(gpu.F32), synth.EmbeddingGemmaSmall(gpu.F32)} {
		t.Run(c.Arch, func(t *testing.T) { embedEncoderThroughScheduler(t, c) })
	}
}

func embedEncoderThroughScheduler(t *testing.T, c synth.Config) {
	c.Seed = 5
	path := filepath.Join(t.TempDir(), c.Arch+".gguf")
	if err := synth.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(cpu.Config{Threads: 2})
	t.Cleanup(func() { be.Close() }) // last: after the scheduler has stopped
	l, err := engine.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := rand.New(rand.NewPCG(5, 6))
	var inputs [][]int32
	for i := 0; i < 12; i++ {
		in := make([]int32, 2+r.IntN(l.Model.Context-2))
		for j := range in {
			in[j] = int32(r.IntN(l.Model.Vocab))
		}
		inputs = append(inputs, in)
	}
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	s := newSched(t, l, Config{MaxBatchTokens: 32})
	var wg sync.WaitGroup
	got := make([][][]float32, 3)
	errs := make([]error, 3)
	for j := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[j], _, errs[j] = s.Embed(context.Background(), inputs[j*4:(j+1)*4], engine.EmbedOptions{}, JobOpts{})
		}()
	}
	wg.Wait()
	for j := range got {
		if errs[j] != nil {
			t.Fatalf("job %d: %v", j, errs[j])
		}
		for i, v := range got[j] {
			w, err := e.Embed(context.Background(), [][]int32{inputs[j*4+i]}, engine.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(v, w[0], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("input %d (%d tokens): the scheduler's vector differs from the input's alone", j*4+i, len(inputs[j*4+i]))
			}
		}
	}
	if _, _, err := s.Generate(context.Background(), &engine.Request{PromptIDs: []int32{1, 2}}, JobOpts{}); err == nil {
		t.Error("a generation on an encoder: no error")
	}
}
