package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// benchScheduler measures the scheduler: batched against one-at-a-time
// throughput, high-priority latency under load, KV utilization under a
// mixed workload, and swap against recompute resume cost.
func benchScheduler(ctx context.Context, modelPath string, threads int, out io.Writer) error {
	if modelPath == "" {
		dir, err := os.MkdirTemp("", "zerolayer-bench-sched-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		modelPath = filepath.Join(dir, "bench134m-q8_0.gguf")
		fmt.Fprintf(os.Stderr, "generating %s ...\n", modelPath)
		if err := synth.WriteFile(modelPath, synth.Bench134M(gpu.Q8_0)); err != nil {
			return err
		}
	}
	be, err := device.Open(device.CPU, threads, nil)
	if err != nil {
		return err
	}
	defer be.Close()
	l, err := engine.Load(modelPath, be)
	if err != nil {
		return err
	}
	defer l.Close()
	newS := func(cfg sched.Config) (*sched.Scheduler, error) {
		s, err := sched.New(l.Model, l.Tokenizer, cfg)
		if err == nil {
			err = s.Start(ctx)
		}
		return s, err
	}
	r := rand.New(rand.NewPCG(1, 1))
	prompt := func(n int) []int32 {
		p := []int32{1}
		for len(p) < n {
			p = append(p, int32(3+r.IntN(l.Model.Vocab-3)))
		}
		return p
	}
	gen := func(s *sched.Scheduler, p []int32, maxTok int, opts sched.JobOpts) (*engine.Result, sched.Stats, error) {
		return s.Generate(ctx, &engine.Request{PromptIDs: p, MaxTokens: maxTok, IgnoreEOS: true}, opts)
	}

	// 1. Aggregate throughput: N jobs together against the same N alone.
	fmt.Fprintf(out, "model %s, %d thread(s)\n\n1. aggregate decode throughput (prompt 16, 32 new tokens each)\n", filepath.Base(modelPath), threads)
	s, err := newS(sched.Config{KVMemoryMB: 512, MaxRunning: 64})
	if err != nil {
		return err
	}
	for _, n := range []int{1, 4, 16, 32} {
		ps := make([][]int32, n)
		for i := range ps {
			ps[i] = prompt(16)
		}
		t0 := time.Now()
		for _, p := range ps {
			if _, _, err := gen(s, p, 32, sched.JobOpts{}); err != nil {
				return err
			}
		}
		alone := time.Since(t0)
		t0 = time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := gen(s, p, 32, sched.JobOpts{}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		together := time.Since(t0)
		tok := float64(n * 32)
		fmt.Fprintf(out, "   %2d jobs: one at a time %7.1f tok/s, batched %7.1f tok/s  (×%.2f)\n", n, tok/alone.Seconds(), tok/together.Seconds(), alone.Seconds()/together.Seconds())
	}
	s.Stop(context.Background())

	// 2. High-priority time to first token, idle and under low-priority load.
	fmt.Fprintf(out, "\n2. high-priority time to first token (prompt 32, 8 tokens)\n")
	ttft := func(load, noInterrupt bool) ([]float64, error) {
		s, err := newS(sched.Config{KVMemoryMB: 64, MaxRunning: 16, NoInterrupt: noInterrupt})
		if err != nil {
			return nil, err
		}
		defer s.Stop(context.Background())
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		if load {
			for i := 0; i < 24; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for lctx.Err() == nil {
						s.Generate(lctx, &engine.Request{PromptIDs: prompt(64), MaxTokens: 64, IgnoreEOS: true}, sched.JobOpts{Class: 2, Tenant: "bulk"})
					}
				}()
			}
			time.Sleep(500 * time.Millisecond)
		}
		var lat []float64
		for i := 0; i < 50; i++ {
			if load {
				// Arrive at a random point of a low-priority step.
				time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
			}
			res, st, err := gen(s, prompt(32), 8, sched.JobOpts{Class: 0, Tenant: "vip"})
			if err != nil {
				stop()
				return nil, err
			}
			lat = append(lat, st.QueueMs+res.Usage.TimeToFirstTokenMs)
		}
		stop()
		wg.Wait()
		sort.Float64s(lat)
		return lat, nil
	}
	idle, err := ttft(false, false)
	if err != nil {
		return err
	}
	busy, err := ttft(true, false)
	if err != nil {
		return err
	}
	uninterrupted, err := ttft(true, true)
	if err != nil {
		return err
	}
	p := func(s []float64, q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	fmt.Fprintf(out, "   idle:   p50 %7.1f ms  p99 %7.1f ms\n", p(idle, .5), p(idle, .99))
	fmt.Fprintf(out, "   loaded: p50 %7.1f ms  p99 %7.1f ms  (p99 ×%.2f of idle)\n", p(busy, .5), p(busy, .99), p(busy, .99)/p(idle, .99))
	fmt.Fprintf(out, "   loaded, steps not interrupted (NoInterrupt): p50 %7.1f ms  p99 %7.1f ms  (p99 ×%.2f of idle)\n",
		p(uninterrupted, .5), p(uninterrupted, .99), p(uninterrupted, .99)/p(idle, .99))

	// 3. KV utilization under a mixed workload.
	fmt.Fprintf(out, "\n3. KV utilization, 50%% short (<64) / 30%% medium (256) / 20%% long (1024) prompts, 16 new tokens\n")
	// 256 blocks hold about a third of the workload at once: memory, not
	// slots, is what admission has to pack. The same jobs without the
	// filler (a long prompt admitted by its first chunk) for comparison.
	lengths := make([]int, 40)
	for i := range lengths {
		lengths[i] = 8 + r.IntN(56)
		switch {
		case i%10 >= 8:
			lengths[i] = 1024
		case i%10 >= 5:
			lengths[i] = 256
		}
	}
	for _, noFiller := range []bool{false, true} {
		s, err = newS(sched.Config{KVBlocks: 256, MaxRunning: 32, MaxBatchTokens: 512, NoFiller: noFiller})
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		var preempted atomic.Int64
		t0 := time.Now()
		for _, n := range lengths {
			p := prompt(n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, st, err := gen(s, p, 16, sched.JobOpts{}); err == nil {
					preempted.Add(int64(st.Preemptions))
				}
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		fill, occ, steps := s.Utilization()
		s.Stop(context.Background())
		name := "with the filler"
		if noFiller {
			name = "without (NoFiller)"
		}
		fmt.Fprintf(out, "   %-19s arena blocks in use ÷ allocated while jobs waited: %.1f%%; tokens held ÷ capacity of the blocks in use: %.1f%% (%d steps, %d preemptions, %.1f s)\n",
			name, 100*occ, 100*fill, steps, preempted.Load(), took.Seconds())
	}

	// 4. Resume cost: copying a victim's blocks back against recomputing.
	fmt.Fprintf(out, "\n4. resume cost of a preempted sequence\n")
	for _, n := range []int{256, 1024} {
		const bt = gpu.DefaultBlockTokens
		kv, err := l.Model.NewKV((n+bt-1)/bt, bt)
		if err != nil {
			return err
		}
		toks := prompt(n)
		pos, seq, tab := make([]int32, n), make([]int32, n), make([]int32, (n+bt-1)/bt)
		for i := range pos {
			pos[i] = int32(i)
		}
		for i := range tab {
			tab[i] = int32(i)
		}
		logits := make([]float32, l.Model.Vocab)
		t0 := time.Now()
		if err := l.Model.Forward(kv, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: [][]int32{tab}}, []int32{int32(n - 1)}, logits); err != nil {
			return err
		}
		recompute := time.Since(t0)
		// Through the backend's host tier, as the scheduler swaps: out,
		// then in (timed, until the device has the blocks).
		be := l.Model.Backend()
		tier, err := gpu.NewHostTier(be, kv, len(tab))
		if err != nil {
			return err
		}
		moves := make([]gpu.BlockMove, len(tab))
		for i := range moves {
			moves[i] = gpu.BlockMove{From: i, To: i}
		}
		if err := tier.Out(moves); err != nil {
			return err
		}
		if err := be.Sync(); err != nil {
			return err
		}
		t0 = time.Now()
		if err := tier.In(moves); err != nil {
			return err
		}
		if err := be.Sync(); err != nil {
			return err
		}
		swap := time.Since(t0)
		bf := kv.Config().BlockFloats()
		fmt.Fprintf(out, "   %4d tokens (%d blocks, %.1f MiB): swap in %8.3f ms, recompute %9.1f ms  (×%.0f)\n",
			n, len(tab), float64(len(tab)*bf*4)/(1<<20), float64(swap.Microseconds())/1000, float64(recompute.Microseconds())/1000, recompute.Seconds()/swap.Seconds())
	}
	return nil
}
