package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/cuda"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// servedName is the name a model is served under: the name given, or the
// lower-cased file name without .gguf when a path was given.
func servedName(arg string) string {
	if strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".gguf") {
		return strings.ToLower(strings.TrimSuffix(filepath.Base(arg), ".gguf"))
	}
	return strings.ToLower(arg)
}

// served is a set of loaded models and the backend they run on.
type served struct {
	models []*worker.ServedModel
	sched  []*worker.ScheduledModel // when scheduling
	paths  map[string]string        // served name → file
	be     gpu.Backend
}

func (s *served) Close() {
	for _, m := range s.sched {
		m.Scheduler.Stop(context.Background())
	}
	for _, m := range s.models {
		m.Loaded.Close()
	}
	s.be.Close()
}

// executor returns the scheduler executor when the models are scheduled,
// else the in-order one.
func (s *served) executor() worker.Executor {
	if len(s.sched) > 0 {
		return worker.NewSchedExecutor(s.be.Name(), contracts.Buckets{}, s.sched...)
	}
	return worker.NewInOrderExecutor(s.be.Name(), s.models...)
}

// schedFlags are the scheduler's command-line settings.
type schedFlags struct {
	executor       string
	kvMemoryMB     int
	hostSwapMB     int
	maxBatchTokens int
	maxRunning     int
	gcInterval     time.Duration
	reserveHigh    bool
	noInterrupt    bool
	device         string
	gpuFraction    float64
}

func (f *schedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.executor, "executor", "sched", "sched (continuous batching, paged KV, preemption) or inorder (one job at a time)")
	fs.IntVar(&f.kvMemoryMB, "kv-memory-mb", 0, "KV cache memory per model (0: 256 on the CPU; on CUDA free device memory × --gpu-memory-fraction)")
	fs.StringVar(&f.device, "device", "cpu", "cpu, cuda (fail without a GPU), or auto (CUDA when a device is present, else the CPU)")
	fs.Float64Var(&f.gpuFraction, "gpu-memory-fraction", 0.9, "share of the device's free memory (after the weights) given to the KV cache")
	fs.IntVar(&f.hostSwapMB, "host-swap-mb", 256, "host tier for preempted KV blocks (0 or less: recompute only)")
	fs.IntVar(&f.maxBatchTokens, "max-batch-tokens", 256, "prefill tokens per step beside the decodes")
	fs.IntVar(&f.maxRunning, "max-running", 64, "sequences per batch")
	fs.DurationVar(&f.gcInterval, "eviction-gc-interval", 30*time.Second, "how long swapped KV blocks are kept for a preempted job")
	fs.BoolVar(&f.reserveHigh, "reserve-high-priority", false, "admit high-priority jobs with their worst case reserved, like low_latency ones")
	fs.BoolVar(&f.noInterrupt, "no-interrupt", false, "let a lower-priority step finish when a high-priority job arrives, instead of stopping it at its next layer (CPU)")
}

// config returns the scheduler config, or nil for the in-order executor.
func (f *schedFlags) config(metrics *sched.Metrics) (*sched.Config, error) {
	switch f.executor {
	case "inorder":
		return nil, nil
	case "sched":
	default:
		return nil, usagef("--executor %q: want sched or inorder", f.executor)
	}
	swap := f.hostSwapMB
	if swap <= 0 {
		swap = -1
	}
	return &sched.Config{KVMemoryMB: max(f.kvMemoryMB, 0), HostSwapMB: swap, MaxBatchTokens: f.maxBatchTokens, MaxRunning: f.maxRunning,
		EvictionGCInterval: f.gcInterval, ReserveHighPriority: f.reserveHigh, NoInterrupt: f.noInterrupt, Metrics: metrics, Device: f.device, GPUMemoryFraction: f.gpuFraction}, nil
}

// newBackend opens the backend for device: cpu, cuda, or auto.
func newBackend(device string, threads int) (gpu.Backend, error) {
	switch device {
	case "", "cpu":
		return cpu.New(cpu.Config{Threads: threads}), nil
	case "cuda", "auto":
		be, err := cuda.New(cuda.Config{})
		if err == nil {
			return be, nil
		}
		if device == "cuda" {
			return nil, fmt.Errorf("--device cuda: %w", err)
		}
		fmt.Fprintf(os.Stderr, "no CUDA device (%v); running on the CPU\n", err)
		return cpu.New(cpu.Config{Threads: threads}), nil
	}
	return nil, usagef("--device %q: want cpu, cuda or auto", device)
}

// observed is the metrics of a worker process and the scheduler config
// (nil for the in-order executor) that feeds the scheduler's metrics.
type observed struct {
	reg     *prometheus.Registry
	sched   *sched.Config
	metrics *worker.Metrics
}

// setup registers the scheduler's and the worker's metrics and returns the
// scheduler config.
func (f *schedFlags) setup() (*observed, error) {
	reg := prometheus.NewRegistry()
	sm, wm := sched.NewMetrics(), worker.NewMetrics()
	if err := errors.Join(sm.Register(reg), wm.Register(reg)); err != nil {
		return nil, err
	}
	sc, err := f.config(sm)
	if err != nil {
		return nil, err
	}
	return &observed{reg: reg, sched: sc, metrics: wm}, nil
}

// concurrency is how many jobs the intake should hold: with the scheduler
// it admits, so the intake feeds it a batch plus a few; one at a time
// otherwise.
func (o *observed) concurrency() int {
	if o.sched != nil {
		return o.sched.WithDefaults().MaxRunning + 8
	}
	return 1
}

// loadModels resolves and loads the named models, each behind a scheduler
// when sc is set, on the device it names (the CPU otherwise).
func loadModels(names []string, threads, kvBlocks int, sc ...*sched.Config) (*served, error) {
	if len(names) == 0 {
		return nil, usagef("give at least one --model")
	}
	device, fraction := "cpu", 0.9
	if len(sc) > 0 && sc[0] != nil {
		device, fraction = sc[0].Device, sc[0].GPUMemoryFraction
	}
	be, err := newBackend(device, threads)
	if err != nil {
		return nil, err
	}
	s := &served{be: be, paths: map[string]string{}}
	for _, n := range names {
		path, err := store.Resolve(n, modelDirs())
		if err != nil {
			s.Close()
			return nil, err
		}
		l, err := engine.Load(path, s.be)
		if err != nil {
			s.Close()
			return nil, err
		}
		var e *engine.Engine
		if len(sc) == 0 || sc[0] == nil {
			blocks := kvBlocks
			if blocks == 0 {
				blocks = 2 * ((l.Model.Context + 15) / 16)
			}
			if e, err = engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: blocks}); err != nil {
				l.Close()
				s.Close()
				return nil, err
			}
		}
		name := servedName(n)
		if _, dup := s.paths[name]; dup {
			l.Close()
			s.Close()
			return nil, usagef("model %q given twice", name)
		}
		s.paths[name] = path
		s.models = append(s.models, &worker.ServedModel{Name: name, Loaded: l, Engine: e})
		if len(sc) > 0 && sc[0] != nil {
			cfg := *sc[0]
			if len(s.sched) > 0 {
				cfg.Metrics = nil // one set of scheduler metrics per process
			}
			if cfg.KVMemoryMB == 0 && cfg.KVBlocks == 0 {
				cfg.KVMemoryMB = 256
				if cb, ok := be.(*cuda.Backend); ok {
					cfg.KVMemoryMB = 0
					// On the GPU the arena takes a share of the memory left
					// after the weights.
					if cfg.KVBlocks, err = cb.KVBlocks(gpu.KVConfig{Layers: l.Model.Layers, KVDim: l.Model.KVDim(), BlockTokens: 16}, fraction/float64(len(names))); err != nil {
						s.Close()
						return nil, err
					}
				}
			}
			sch, err := sched.New(l.Model, l.Tokenizer, cfg)
			if err != nil {
				s.Close()
				return nil, err
			}
			if err := sch.Start(context.Background()); err != nil {
				s.Close()
				return nil, err
			}
			s.sched = append(s.sched, &worker.ScheduledModel{Name: name, Loaded: l, Scheduler: sch})
		}
	}
	return s, nil
}

func describe(s *served) string {
	var parts []string
	for _, m := range s.models {
		parts = append(parts, fmt.Sprintf("%s (%s)", m.Name, s.paths[m.Name]))
	}
	return strings.Join(parts, ", ")
}
