//go:build cuda || cudaemu

package cuda_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// TestSchedulerOnDevice runs the stories260K reference prompts together
// through the scheduler on the device, in an arena too small for them, so
// jobs are preempted: to the backend's pinned host tier (asynchronous
// copies on the copy stream) and, in the second run, by dropping blocks and
// recomputing. The greedy outputs must still equal reference.json.
func TestSchedulerOnDevice(t *testing.T) {
	dir, ref := storiesReference(t)
	be := newBackend(t)
	defer be.Close()
	l, err := engine.Load(filepath.Join(dir, "stories260K.gguf"), be)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, tc := range []struct {
		name string
		swap int // HostSwapMB
		mode string
	}{{"swap", 16, "(swap)"}, {"recompute", -1, "(recompute)"}} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.swap < 0 {
				t.Skip("-short: recompute is covered by the CPU scheduler tests (and slow on the emulator)")
			}
			// Each case needs about 5 blocks of 16 tokens; 12 hold two.
			s, err := sched.New(l.Model, l.Tokenizer, sched.Config{KVBlocks: 12, MaxBatchTokens: 64, HostSwapMB: tc.swap})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(context.Background())
			var preempted, swappedIn, wrongMode atomic.Int64
			opts := sched.JobOpts{OnEvent: func(kind, detail string) {
				switch {
				case kind == "preempted" && !strings.HasSuffix(detail, tc.mode):
					wrongMode.Add(1)
				case kind == "preempted":
					preempted.Add(1)
				case kind == "resumed" && strings.HasPrefix(detail, "swapped in"):
					swappedIn.Add(1)
				}
			}}
			outs := make([]*engine.Result, len(ref.Cases))
			errs := make([]error, len(ref.Cases))
			var wg sync.WaitGroup
			for i, c := range ref.Cases {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := &engine.Request{PromptIDs: c.PromptIDs, MaxTokens: len(c.GeneratedIDs)}
					outs[i], _, errs[i] = s.Generate(context.Background(), req, opts)
				}()
			}
			wg.Wait()
			for i, c := range ref.Cases {
				if errs[i] != nil {
					t.Fatalf("%s: %v", c.Name, errs[i])
				}
				if !slices.Equal(outs[i].OutputIDs, c.GeneratedIDs) {
					t.Errorf("%s: generated %v, reference %v", c.Name, outs[i].OutputIDs, c.GeneratedIDs)
				}
			}
			if wrongMode.Load() != 0 {
				t.Errorf("%d preemptions were not by %s", wrongMode.Load(), tc.mode)
			}
			if preempted.Load() == 0 {
				t.Fatal("no job was preempted: the arena is not tight enough for the test to mean anything")
			}
			if tc.swap > 0 && swappedIn.Load() == 0 {
				t.Errorf("%d preemptions but no job resumed from the host tier", preempted.Load())
			}
			t.Logf("%d preemptions, %d resumed from the host tier", preempted.Load(), swappedIn.Load())
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWindowedSchedulerOnDevice runs shared/models/archs' gemma3 (six
// local layers with window 8, one global) through the scheduler on the
// device with 4-token blocks, so the local layers' tables hold −1 for the
// blocks their window has passed (given back), in an arena that makes
// jobs swap to the host tier and back with such tables. The ids must be
// llama.cpp's up to each case's first low-margin step.
func TestWindowedSchedulerOnDevice(t *testing.T) {
	be := newBackend(t)
	defer be.Close()
	if err := be.ArchReady(); err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(*sharedDir, "models", "archs")
	path := filepath.Join(dir, "gemma3-s-f32.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared fixture %s not present", path)
	}
	refs := modeltest.ReadArchCases(t, filepath.Join(dir, "ref-gemma3-s-f32.txt"))
	l, err := engine.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	steps := 24
	if testing.Short() {
		steps = 12
	}
	const tol = 1.5e-3
	s, err := sched.New(l.Model, l.Tokenizer, sched.Config{BlockTokens: 4, MaxBatchTokens: 7, KVBlocks: 64, HostSwapBlocks: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	var swappedIn atomic.Int64
	opts := sched.JobOpts{OnEvent: func(kind, detail string) {
		if kind == "resumed" && strings.HasPrefix(detail, "swapped in") {
			swappedIn.Add(1)
		}
	}}
	// The five cases at low priority; once they all decode, the longest
	// again at high priority, which preempts them.
	outs := make([]*engine.Result, len(refs)+1)
	errs := make([]error, len(refs)+1)
	var wg sync.WaitGroup
	var decoding sync.WaitGroup
	for i, r := range refs {
		wg.Add(1)
		decoding.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			req := &engine.Request{PromptIDs: r.Prompt, MaxTokens: steps, IgnoreEOS: true, OnToken: func(engine.Token) error {
				once.Do(decoding.Done)
				return nil
			}}
			lo := opts
			lo.Class = 2
			outs[i], _, errs[i] = s.Generate(context.Background(), req, lo)
		}()
	}
	decoding.Wait()
	last := len(refs) - 1
	hi := opts
	hi.Class = 0
	outs[len(refs)], _, errs[len(refs)] = s.Generate(context.Background(), &engine.Request{PromptIDs: refs[last].Prompt, MaxTokens: steps, IgnoreEOS: true}, hi)
	wg.Wait()
	refs = append(refs, refs[last])
	for i, r := range refs {
		if errs[i] != nil {
			t.Fatalf("case %d: %v", i, errs[i])
		}
		upTo := min(steps, len(r.IDs))
		for j, mg := range r.Margins[:upTo] {
			if mg < 2*tol {
				upTo = j
				break
			}
		}
		if got := outs[i].OutputIDs; len(got) < upTo || !slices.Equal(got[:upTo], r.IDs[:upTo]) {
			t.Errorf("case %d: ids %v, llama.cpp %v (compared up to step %d)", i, got, r.IDs[:upTo], upTo)
		}
	}
	if swappedIn.Load() == 0 {
		t.Error("no job resumed from the host tier: the arena is not tight enough for the test to mean anything")
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}
