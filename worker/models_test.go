package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

func TestOpenModelsConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  worker.ModelsConfig
		want string
	}{
		{"no model", worker.ModelsConfig{}, "no model to serve"},
		{"bad executor", worker.ModelsConfig{Models: []string{"m"}, Executor: "fifo"}, `executor "fifo"`},
		{"bad device", worker.ModelsConfig{Models: []string{"m"}, Device: "tpu"}, `"tpu": want cpu, cuda or auto`},
		{"bad fraction", worker.ModelsConfig{Models: []string{"m"}, GPUMemoryFraction: 1.5}, "GPU memory fraction 1.5"},
		{"twice", worker.ModelsConfig{Models: []string{"Stories260K", "x/stories260k.gguf"}}, `model "stories260k" given twice`},
	}
	for _, tt := range tests {
		if _, err := worker.OpenModels(context.Background(), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	// A name not found in the folders is store's error, after the backend
	// opened (and was closed again: goleak checks).
	_, err := worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"no-such-model"}, ModelDirs: []string{t.TempDir()}, Threads: 1})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown model: %v", err)
	}
}

// TestOpenModels serves stories260K, by name from a model folder, with
// each executor, and runs a job on it.
func TestOpenModels(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	for _, tc := range []struct {
		executor string
		conc     int
	}{
		{worker.ExecutorSched, 2*2 + 3*(sched.LookAhead+sched.LookAheadTenants)},
		{worker.ExecutorInOrder, 1},
	} {
		t.Run(tc.executor, func(t *testing.T) {
			m, err := worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"Stories260K"}, ModelDirs: []string{filepath.Dir(path)},
				Threads: 1, Executor: tc.executor, Sched: sched.Config{MaxRunning: 2, KVBlocks: 64}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			defer m.Close() // twice is safe
			if m.Concurrency() != tc.conc || m.OnGPU() {
				t.Errorf("concurrency %d, on the GPU %v", m.Concurrency(), m.OnGPU())
			}
			if got := m.Names(); len(got) != 1 || got[0] != workertest.ModelName || m.Paths()[workertest.ModelName] != path {
				t.Errorf("names %v, paths %v", got, m.Paths())
			}
			want := workertest.ModelName + " (" + path + ")"
			if tc.executor == worker.ExecutorSched {
				// 64 blocks of 16 of stories260K's 2,048 positions, F16.
				want = workertest.ModelName + " (" + path + "; KV arena 0.6 MB: 0.5 contexts of 2,048 tokens, as configured)"
			}
			if d := m.Describe(); d != want {
				t.Errorf("describe %q", d)
			}
			x := m.Executor()
			if _, admits := x.(worker.Admitter); admits != (tc.executor == worker.ExecutorSched) || !strings.HasPrefix(x.Device(), "cpu") {
				t.Errorf("executor %T on %q", x, x.Device())
			}
			out, err := x.Execute(context.Background(), &worker.Job{ID: "j1", Tenant: "acme", Request: &contracts.JobRequest{Model: workertest.ModelName, MaxTokens: 8,
				Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}}, sinkFunc(func(string, []int32, []contracts.TokenLogprob) {}))
			if err != nil || out.Usage.OutputTokens != 8 || out.Usage.Architecture != "llama" {
				t.Fatalf("execute: %v %+v", err, out)
			}
		})
	}
}

// TestOpenModelsKVType: the KV cache type of --kv-type reaches the arena
// and the usage a job reports (F16 by default on the CPU: half of F32's
// bytes for the same job), and a type the backend cannot store is refused
// at start.
func TestOpenModelsKVType(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	run := func(kvType string) (float64, []int32) {
		t.Helper()
		m, err := worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"Stories260K"}, ModelDirs: []string{filepath.Dir(path)},
			Threads: 1, KVType: kvType, Sched: sched.Config{MaxRunning: 2, KVBlocks: 64}})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var ids []int32
		out, err := m.Executor().Execute(context.Background(), &worker.Job{ID: "j1", Tenant: "acme", Request: &contracts.JobRequest{Model: workertest.ModelName, MaxTokens: 24,
			Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}}, sinkFunc(func(_ string, t []int32, _ []contracts.TokenLogprob) { ids = append(ids, t...) }))
		if err != nil {
			t.Fatal(err)
		}
		return out.Usage.MemoryAllocatedMB, ids
	}
	f16, ids16 := run("")
	f32, ids32 := run("f32")
	if f16 <= 0 || f32 != 2*f16 {
		t.Errorf("memory_allocated_mb: %g with the default type, %g with F32; want half", f16, f32)
	}
	if !slices.Equal(ids16, ids32) {
		t.Errorf("greedy ids differ: F16 %v, F32 %v", ids16, ids32)
	}
	_, err := worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"Stories260K"}, ModelDirs: []string{filepath.Dir(path)},
		Threads: 1, KVType: "q4_0", Sched: sched.Config{KVBlocks: 64}})
	if err == nil || !strings.Contains(err.Error(), "KV cache type") {
		t.Errorf("a Q4_0 KV cache: %v", err)
	}
	// Q8_0 scales 32 of a head's values: Stories260K's heads of 8 are refused.
	_, err = worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"Stories260K"}, ModelDirs: []string{filepath.Dir(path)},
		Threads: 1, KVType: "q8_0", Sched: sched.Config{KVBlocks: 64}})
	if err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Errorf("a Q8_0 KV cache of heads of 8: %v", err)
	}
}
