package worker_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestModelInfoAndUsageArch: a split synthetic model is served under its
// name by both executors; its jobs' usage carries the architecture, and
// zerolayer_model_info, set by worker.New, describes it.
func TestModelInfoAndUsageArch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := synth.Tiny(gpu.F32)
	c.Dim, c.Hidden, c.Heads, c.KVHeads, c.Layers, c.Vocab, c.Context = 64, 128, 4, 2, 2, 300, 512
	w, err := synth.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteSplit(filepath.Join(dir, "TinySplit"), 2); err != nil {
		t.Fatal(err)
	}
	for _, executor := range []string{worker.ExecutorSched, worker.ExecutorInOrder} {
		t.Run(executor, func(t *testing.T) {
			m, err := worker.OpenModels(context.Background(), worker.ModelsConfig{Models: []string{"tinysplit"}, ModelDirs: []string{dir},
				Threads: 1, Executor: executor, Sched: sched.Config{MaxRunning: 2, KVBlocks: 64}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Names(); len(got) != 1 || got[0] != "tinysplit" || !strings.HasSuffix(m.Paths()["tinysplit"], "TinySplit-00001-of-00002.gguf") {
				t.Fatalf("names %v, paths %v", got, m.Paths())
			}
			x := m.Executor()
			out, err := x.Execute(context.Background(), &worker.Job{ID: "j1", Tenant: "acme", Request: &contracts.JobRequest{Model: "tinysplit", MaxTokens: 3,
				Messages: []contracts.Message{{Role: "user", Content: "a b c"}}}}, sinkFunc(func(string, []int32, []contracts.TokenLogprob) {}))
			if err != nil || out.Usage.Architecture != "llama" {
				t.Fatalf("execute: %v, usage %+v", err, out)
			}
			d, ok := x.(worker.ModelDescriber)
			if !ok {
				t.Fatalf("%T describes no models", x)
			}
			metrics := worker.NewMetrics()
			reg := prometheus.NewRegistry()
			if err := metrics.Register(reg); err != nil {
				t.Fatal(err)
			}
			if infos := d.ModelInfos(); len(infos) != 1 || infos[0].Arch != "llama" {
				t.Fatalf("infos %+v", infos)
			}
			// worker.New sets the info metric from the executor.
			b := workertest.Setup(t, contracts.StreamsConfig{})
			b.StartWorkerConfig(t, x, worker.Config{ID: "w1", Metrics: metrics})
			want := `
# HELP zerolayer_model_info The models this worker serves, always 1: model is the served name (the label of the per-job metrics), arch the GGUF general.architecture, context the trained context length, layers the transformer blocks.
# TYPE zerolayer_model_info gauge
zerolayer_model_info{arch="llama",context="512",layers="2",model="tinysplit"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "zerolayer_model_info"); err != nil {
				t.Error(err)
			}
		})
	}
}
