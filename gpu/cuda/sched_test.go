//go:build cuda || cudaemu

package cuda_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zerolayer/zerolayer/worker/engine"
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
