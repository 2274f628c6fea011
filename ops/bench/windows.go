package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// WindowsConfig configures Windows.
type WindowsConfig struct {
	// Model is the GGUF file (a model with sliding-window layers).
	// Defaults to "": the generated Gemma 3 270M-shaped Q8_0 model,
	// written to a temporary folder.
	Model string
	// Threads is the CPU thread count. Defaults to 2.
	Threads int
	// Jobs, Prompt and NewTokens are the workload: that many jobs of
	// Prompt-token prompts generating NewTokens each, all submitted at
	// once. Default 12, 2048 and 128.
	Jobs, Prompt, NewTokens int
	// KVMemoryMB is the arena of both layouts. Defaults to 256.
	KVMemoryMB int
	// HostSwapMB is the host tier preempted jobs swap to
	// (sched.Config.HostSwapMB: 0 is its default, negative none).
	HostSwapMB int
	// Progress receives a line when the generated model is written.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c WindowsConfig) WithDefaults() WindowsConfig {
	if c.Threads == 0 {
		c.Threads = 2
	}
	if c.Jobs == 0 {
		c.Jobs = 12
	}
	if c.Prompt == 0 {
		c.Prompt = 2048
	}
	if c.NewTokens == 0 {
		c.NewTokens = 128
	}
	if c.KVMemoryMB == 0 {
		c.KVMemoryMB = 256
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// WindowsRun is one layout's measurements.
type WindowsRun struct {
	Layout     string // "whole" or "windowed"
	Blocks     int
	BlockBytes int64
	// MostRunning is the most jobs one step ran (sched.MostInStep);
	// JobKVMB the largest KV memory one job held (its own blocks: the
	// workload shares no prefix); Preemptions the evictions admission's
	// look-ahead did not avoid (to the host tier, or recomputed).
	MostRunning int
	JobKVMB     float64
	Preemptions int
	// Occupancy is the arena's blocks in use while jobs waited.
	Occupancy float64
	// TTFTp50 and TTFTmax are times to first token (queue included).
	TTFTp50, TTFTmax time.Duration
	Took             time.Duration
	// TokPerSec is every job's prompt and output tokens over Took.
	TokPerSec, OutPerSec float64
}

// Windows measures what giving back the KV blocks of sliding-window layers
// buys: the same jobs in the same KV memory, with every layer's blocks
// kept whole (sched.Config.WholeBlocks, the layout before) and with the
// windowed layout, run one after the other in this process.
func Windows(ctx context.Context, cfg WindowsConfig, w io.Writer) ([]WindowsRun, error) {
	cfg = cfg.WithDefaults()
	l, path, closeModel, err := loadCPUModel(cfg.Model, "gemma3-270m", cfg.Threads, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer closeModel()
	cfg.Model = path
	if l.Model.SlidingWindow == 0 {
		return nil, fmt.Errorf("bench: %s has no sliding-window layers: both layouts are the same", filepath.Base(cfg.Model))
	}
	if cfg.Prompt+cfg.NewTokens > l.Model.Context {
		return nil, fmt.Errorf("bench: %d prompt and %d new tokens exceed the context of %d", cfg.Prompt, cfg.NewTokens, l.Model.Context)
	}
	r := rand.New(rand.NewPCG(5, 5))
	prompts := make([][]int32, cfg.Jobs)
	for i := range prompts {
		prompts[i] = randomPrompt(r, l.Model.Vocab, cfg.Prompt)
	}
	fmt.Fprintf(w, "model %s (window %d), %d thread(s): %d jobs of %d prompt and %d new tokens in %d MB of KV memory\n\n",
		filepath.Base(cfg.Model), l.Model.SlidingWindow, cfg.Threads, cfg.Jobs, cfg.Prompt, cfg.NewTokens, cfg.KVMemoryMB)
	fmt.Fprintf(w, "%-9s %7s %9s %13s %10s %9s %11s %9s %9s %8s %9s %9s\n", "layout", "blocks", "block KB", "most running", "job KV MB", "occupancy", "preemptions", "TTFT p50", "TTFT max", "took", "tok/s", "out tok/s")
	var runs []WindowsRun
	for _, whole := range []bool{true, false} {
		run, err := windowsRun(ctx, l, cfg, prompts, whole)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "%-9s %7d %9.1f %13d %10.1f %8.1f%% %11d %9s %9s %8s %9.1f %9.1f\n", run.Layout, run.Blocks, float64(run.BlockBytes)/1024,
			run.MostRunning, run.JobKVMB, 100*run.Occupancy, run.Preemptions, run.TTFTp50.Round(time.Millisecond), run.TTFTmax.Round(time.Millisecond),
			run.Took.Round(100*time.Millisecond), run.TokPerSec, run.OutPerSec)
		runs = append(runs, run)
	}
	if len(runs) == 2 && runs[0].MostRunning > 0 {
		fmt.Fprintf(w, "\nwindowed ÷ whole: %.2f× the jobs running at once, %.2f× the throughput, %.2f× the job's KV memory\n",
			float64(runs[1].MostRunning)/float64(runs[0].MostRunning), runs[1].TokPerSec/runs[0].TokPerSec, runs[1].JobKVMB/runs[0].JobKVMB)
	}
	return runs, nil
}

// windowsRun runs the workload once in one layout.
func windowsRun(ctx context.Context, l *engine.Loaded, cfg WindowsConfig, prompts [][]int32, whole bool) (WindowsRun, error) {
	run := WindowsRun{Layout: "windowed"}
	if whole {
		run.Layout = "whole"
	}
	s, err := sched.New(l.Model, l.Tokenizer, sched.Config{KVMemoryMB: cfg.KVMemoryMB, HostSwapMB: cfg.HostSwapMB, WholeBlocks: whole})
	if err != nil {
		return run, err
	}
	if err := s.Start(ctx); err != nil {
		return run, err
	}
	defer s.Stop(context.Background())
	run.Blocks, run.BlockBytes = s.Blocks(), s.BlockBytes()
	first := make([]time.Time, len(prompts))
	errs := make([]error, len(prompts))
	kv := make([]int64, len(prompts))
	preempted := make([]int, len(prompts))
	began := time.Now()
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &engine.Request{PromptIDs: p, MaxTokens: cfg.NewTokens, IgnoreEOS: true, OnToken: func(engine.Token) error {
				if first[i].IsZero() {
					first[i] = time.Now()
				}
				return nil
			}}
			res, st, err := s.Generate(ctx, req, sched.JobOpts{Tenant: "bench"})
			if errs[i] = err; err == nil {
				kv[i], preempted[i] = res.Usage.KVBytes, st.Preemptions
			}
		}()
	}
	wg.Wait()
	run.Took = time.Since(began)
	var ttft []time.Duration
	for i, f := range first {
		if errs[i] != nil {
			return run, fmt.Errorf("bench: %s layout, job %d: %w", run.Layout, i, errs[i])
		}
		ttft = append(ttft, f.Sub(began))
		run.JobKVMB = max(run.JobKVMB, float64(kv[i])/(1<<20))
		run.Preemptions += preempted[i]
	}
	run.MostRunning = s.MostInStep()
	slices.Sort(ttft)
	run.TTFTp50, run.TTFTmax = ttft[len(ttft)/2], ttft[len(ttft)-1]
	_, run.Occupancy, _ = s.Utilization()
	n := len(prompts)
	run.TokPerSec = float64(n*(cfg.Prompt+cfg.NewTokens)) / run.Took.Seconds()
	run.OutPerSec = float64(n*cfg.NewTokens) / run.Took.Seconds()
	return run, nil
}
