package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/ops/bench"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// TestMain fails the package if a benchmark leaves a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests run each benchmark on the TinyStories 260K model with the
// smallest sizes, and check the counts and that rates are positive, never
// timings.

func TestModels(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	res, err := bench.Models(context.Background(), bench.ModelConfig{Targets: []bench.Target{bench.FileTarget(path)},
		PromptTokens: 16, GenTokens: 8, Batches: []int{1, 2}, Reps: 1, Kernels: []string{"avx2", "best"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bandwidth[1] <= 0 {
		t.Errorf("bandwidth %v", res.Bandwidth)
	}
	var tests []string
	for i, r := range res.Rows {
		tests = append(tests, r.Test)
		if r.Model != "stories260K.gguf" || r.Type != "F32" || r.Params <= 0 || r.Threads != 1 || r.TokensPerS <= 0 {
			t.Errorf("row %+v", r)
		}
		// The first four ran with the AVX2 kernels (or the Go ones, on a
		// CPU without AVX2), the rest with the best this CPU has.
		want := cpu.KernelPaths()
		if i < 4 && want != "go" {
			want = "avx2"
		}
		if r.Kernels != want {
			t.Errorf("row %d ran with kernels %q, want %q", i, r.Kernels, want)
		}
	}
	if got := strings.Join(tests, " "); got != "pp16 tg8 batch1 batch2 pp16 tg8 batch1 batch2" {
		t.Errorf("tests %q", got)
	}
	var table, js bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(table.String(), "stories260K.gguf"); n != 8 || !strings.Contains(table.String(), "% of bandwidth") {
		t.Errorf("table with %d model rows:\n%s", n, table.String())
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bandwidth map[string]float64 `json:"bandwidth_bytes_per_s"`
		Results   []bench.Row        `json:"results"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Results) != 8 || doc.Bandwidth["1"] <= 0 {
		t.Errorf("json (%v):\n%s", err, js.String())
	}
}

func TestModelsErrors(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	for _, cfg := range []bench.ModelConfig{
		{},
		{Targets: []bench.Target{bench.FileTarget(path)}, Batches: []int{0}},
		{Targets: []bench.Target{bench.FileTarget(path)}, PromptTokens: 100000},
		{Targets: []bench.Target{bench.FileTarget(path)}, Kernels: []string{"sse"}},
	} {
		if _, err := bench.Models(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestScheduler(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	var out bytes.Buffer
	res, err := bench.Scheduler(context.Background(), bench.SchedulerConfig{Model: path, JobCounts: []int{1, 2}, NewTokens: 4,
		Probes: 3, LoadJobs: 2, MixJobs: 10, ResumeTokens: []int{32}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Throughput) != 2 || res.Throughput[1].Jobs != 2 {
		t.Errorf("throughput %+v", res.Throughput)
	}
	for _, r := range res.Throughput {
		if r.Alone <= 0 || r.Batched <= 0 || r.Steady < 0 || r.Jobs == 1 && r.Steady <= 0 ||
			r.Engine <= 0 || r.EngineJobs <= 0 || r.EngineAtJobs <= 0 || r.BatchedOfJobs <= 0 || r.SteadyOfEngine < 0 || r.Jobs == 1 && r.SteadyOfEngine <= 0 {
			t.Errorf("throughput %+v", r)
		}
		// Prompts of 16 and 4 new tokens: 20 tokens in and out for every 4
		// generated, over the same best run.
		if want := r.Batched * 20 / 4; math.Abs(r.Total-want) > 1e-6*want {
			t.Errorf("%d jobs: total %.1f tok/s, want %.1f (batched %.1f with the prompts counted)", r.Jobs, r.Total, want, r.Batched)
		}
	}
	if !strings.Contains(out.String(), "each run against the engine's right after it") {
		t.Errorf("part 1 does not give the paired ratios:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "3 probes a condition in 4 rounds, the conditions taking turns") {
		t.Errorf("part 2 does not say how its probes ran:\n%s", out.String())
	}
	for _, lat := range [][]float64{res.Idle, res.Loaded, res.Uninterrupted} {
		if len(lat) != 3 || lat[0] < 0 || lat[0] > lat[2] {
			t.Errorf("latencies %v: want 3, sorted", lat)
		}
	}
	if len(res.Occupancy) != 2 || res.Occupancy[0].NoFiller || !res.Occupancy[1].NoFiller {
		t.Errorf("occupancy %+v", res.Occupancy)
	}
	for _, o := range res.Occupancy {
		if o.Steps <= 0 || o.Fill <= 0 || o.Fill > 1 || o.Occupied < 0 || o.Occupied > 1 {
			t.Errorf("occupancy %+v", o)
		}
	}
	if len(res.Resume) != 1 || res.Resume[0].Tokens != 32 || res.Resume[0].Blocks != 2 || res.Resume[0].Bytes <= 0 ||
		res.Resume[0].Swap <= 0 || res.Resume[0].Recompute <= 0 {
		t.Errorf("resume %+v", res.Resume)
	}
	for _, part := range []string{"model stories260K.gguf, 1 thread(s)", "\n1. ", "\n2. ", "\n3. ", "\n4. ", "   32 tokens (2 blocks"} {
		if !strings.Contains(out.String(), part) {
			t.Errorf("report without %q:\n%s", part, out.String())
		}
	}
}

// TestWindows runs the windows benchmark on shared/models/archs' gemma3
// (window 8) with prompts long past the window, eight jobs in a 1 MB arena
// (F16 values) that the whole-block layout fills with a few: the windowed
// one holds a job in less memory and runs more jobs at once; on
// stories260K (no window) it refuses.
func TestWindows(t *testing.T) {
	t.Parallel()
	path := modeltest.SharedPath(t, "models/archs/gemma3-s-f32.gguf")
	var out bytes.Buffer
	runs, err := bench.Windows(context.Background(), bench.WindowsConfig{Model: path, Threads: 1, Jobs: 8, Prompt: 120, NewTokens: 40, KVMemoryMB: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Layout != "whole" || runs[1].Layout != "windowed" {
		t.Fatalf("runs %+v", runs)
	}
	w, g := runs[0], runs[1]
	if w.Blocks*int(w.BlockBytes) > 1<<20 || g.Blocks*int(g.BlockBytes) > 1<<20 || g.Blocks < 7*w.Blocks {
		t.Errorf("arenas: %d blocks of %d bytes, %d of %d", w.Blocks, w.BlockBytes, g.Blocks, g.BlockBytes)
	}
	if g.JobKVMB >= w.JobKVMB || g.MostRunning <= w.MostRunning || g.TokPerSec <= 0 || w.TokPerSec <= 0 {
		t.Errorf("whole %+v, windowed %+v", w, g)
	}
	if !strings.Contains(out.String(), "windowed ÷ whole:") {
		t.Errorf("report:\n%s", out.String())
	}
	if _, err := bench.Windows(context.Background(), bench.WindowsConfig{Model: modeltest.StoriesPath(t), Jobs: 1, Prompt: 8, NewTokens: 2}, io.Discard); err == nil {
		t.Error("stories260K (no window): no error")
	}
}

// TestStackBenchmarks runs the pipeline, the gateway and the serve
// benchmarks on one dev stack.
func TestStackBenchmarks(t *testing.T) {
	t.Parallel()
	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var out bytes.Buffer
	p, err := bench.Pipeline(ctx, st, bench.PipelineConfig{Jobs: 6, Unloaded: 2}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 6 || len(p.Queue) != 6 || len(p.FirstToken) != 6 || len(p.QueueFirstToken) != 6 || len(p.UnloadedQueue) != 2 ||
		p.Submitted <= 0 || p.Rated < p.Submitted || p.Finished <= 0 || p.Ingested <= 0 {
		t.Errorf("pipeline %+v", p)
	}
	if !strings.Contains(out.String(), "pipeline: 6 jobs") || !strings.Contains(out.String(), "unloaded (2 jobs one at a time)") {
		t.Errorf("pipeline report:\n%s", out.String())
	}

	out.Reset()
	g, err := bench.Gateway(ctx, st, bench.GatewayConfig{Requests: 4, Concurrency: 2, Tokens: 4}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []bench.Rate{g.Producer, g.HTTP, g.SequentialProducer, g.SequentialHTTP} {
		if r.PerSecond <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 {
			t.Errorf("rate %+v", r)
		}
	}
	if !strings.HasPrefix(out.String(), "4 requests of 4 tokens, 2 at a time, model stories260k\n") || strings.Count(out.String(), "requests/s") != 4 ||
		!strings.Contains(out.String(), "4 one-token requests one at a time") {
		t.Errorf("gateway report:\n%s", out.String())
	}

	out.Reset()
	s, err := bench.Serve(ctx, st, bench.ServeConfig{Concurrency: []int{1, 2}, Tokens: 4, Requests: 3}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 4 || s.CPU == "" {
		t.Fatalf("serve %+v", s)
	}
	for i, r := range s.Rows {
		want := bench.ServeRow{Path: []string{"http", "go"}[i%2], Concurrency: 1 + i/2, Requests: 3}
		if r.Path != want.Path || r.Concurrency != want.Concurrency || r.Requests != want.Requests ||
			r.Tokens <= 0 || r.Tokens > 3*4 || r.Short < 0 || r.Short > 3 || r.TokensPerS <= 0 ||
			r.TTFTP50 <= 0 || r.TTFTP99 < r.TTFTP50 || r.TPOTP50 < 0 || r.TPOTP99 < r.TPOTP50 {
			t.Errorf("serve row %d: %+v", i, r)
		}
	}
	if !strings.HasPrefix(out.String(), "model stories260k, 4 tokens per request") || strings.Count(out.String(), "\n") != 7 ||
		!strings.Contains(out.String(), "HTTP ÷ Go producer tok/s: 1 clients ") || !strings.Contains(out.String(), ", 2 clients ") {
		t.Errorf("serve report:\n%s", out.String())
	}
	if _, err := bench.Serve(ctx, st, bench.ServeConfig{Concurrency: []int{0}}, io.Discard); err == nil {
		t.Error("0 clients: no error")
	}
}
