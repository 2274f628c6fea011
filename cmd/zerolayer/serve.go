package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// schedFlags are the serving flags of worker, dev and bench: they become a
// worker.ModelsConfig.
type schedFlags struct {
	executor       string
	kvMemoryMB     int
	hostSwapMB     int
	maxBatchTokens int
	maxRunning     int
	maxStepLatency time.Duration
	gcInterval     time.Duration
	reserveHigh    bool
	noInterrupt    bool
	device         string
	gpuFraction    float64
	cpuKernels     string
	kvType         string
	speculation    string
}

func (f *schedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.executor, "executor", "sched", "sched (continuous batching, paged KV, preemption) or inorder (one job at a time)")
	fs.IntVar(&f.kvMemoryMB, "kv-memory-mb", 0, "KV cache memory per model (0: on the CPU 4 of the model's full contexts, more on a machine with memory to spare, at most a quarter of its memory, at least 256; on CUDA free device memory × --gpu-memory-fraction); the worker prints the size and why at start")
	fs.StringVar(&f.device, "device", "cpu", "cpu, cuda (fail without a GPU), or auto (CUDA when a device is present, else the CPU)")
	fs.Float64Var(&f.gpuFraction, "gpu-memory-fraction", 0.9, "share of the device's free memory (after the weights) given to the KV cache")
	fs.IntVar(&f.hostSwapMB, "host-swap-mb", 256, "host tier for preempted KV blocks (0 or less: recompute only)")
	fs.IntVar(&f.maxBatchTokens, "max-batch-tokens", 256, "prefill tokens per step beside the decodes")
	fs.IntVar(&f.maxRunning, "max-running", 64, "sequences per batch")
	fs.DurationVar(&f.maxStepLatency, "max-step-latency", 150*time.Millisecond, "while sequences decode, cut prefill chunks so a step stays under this (0: no bound, full --max-batch-tokens chunks)")
	fs.DurationVar(&f.gcInterval, "eviction-gc-interval", 30*time.Second, "how long swapped KV blocks are kept for a preempted job")
	fs.BoolVar(&f.reserveHigh, "reserve-high-priority", false, "admit high-priority jobs with their worst case reserved, like low_latency ones")
	fs.BoolVar(&f.noInterrupt, "no-interrupt", false, "let a lower-priority step finish when a high-priority job arrives, instead of stopping it within half a layer (CPU)")
	fs.StringVar(&f.kvType, "kv-type", "", "KV cache element type: f16, f32 or q8_0 (default: the device's, f16 on the CPU as llama.cpp's, f32 on CUDA); f16 holds twice the tokens of f32 in the same --kv-memory-mb, q8_0 3.8 times (heads of a multiple of 32 values; fast with AVX-512) (bench of models: a comma-separated list, each measured in turn)")
	fs.StringVar(&f.speculation, "speculation", "auto", "auto (draft the tokens a job's constraints force or its context repeats, and verify them in one forward pass: the same output in fewer passes) or off; a job's speculation \"off\" turns it off for that job")
	fs.StringVar(&f.cpuKernels, "cpu-kernels", "best", "CPU kernels: best (AVX-512 and VNNI kernels where the CPU has them) or avx2 (without them: the AVX2 kernels, the packed Q8_0, Q4_0, Q4_K, Q6_K and F32 ones included); the same results bit for bit either way")
}

// models returns the serving config of the flags for the named models,
// with the scheduler's metrics (nil for none); the flags' values are
// checked here, as usage errors.
func (f *schedFlags) models(names []string, threads int, metrics *sched.Metrics) (worker.ModelsConfig, error) {
	if f.executor != worker.ExecutorSched && f.executor != worker.ExecutorInOrder {
		return worker.ModelsConfig{}, usagef("--executor %q: want sched or inorder", f.executor)
	}
	if device.Check(f.device) != nil {
		return worker.ModelsConfig{}, usagef("--device %q: want cpu, cuda or auto", f.device)
	}
	if f.cpuKernels != "best" && f.cpuKernels != "avx2" {
		return worker.ModelsConfig{}, usagef("--cpu-kernels %q: want best or avx2", f.cpuKernels)
	}
	if f.speculation != string(contracts.SpeculationAuto) && f.speculation != string(contracts.SpeculationOff) {
		return worker.ModelsConfig{}, usagef("--speculation %q: want auto or off", f.speculation)
	}
	cpu.SetWideKernels(f.cpuKernels == "best")
	if len(names) == 0 {
		return worker.ModelsConfig{}, usagef("give at least one --model")
	}
	if name, dup := worker.DuplicateModel(names); dup {
		return worker.ModelsConfig{}, usagef("model %q given twice", name)
	}
	swap := f.hostSwap()
	stepLatency := f.maxStepLatency
	if stepLatency <= 0 {
		stepLatency = -1
	}
	threads = spareProcessor(threads)
	return worker.ModelsConfig{Models: names, ModelDirs: modelDirs(), Device: f.device, Threads: threads, Executor: f.executor,
		GPUMemoryFraction: f.gpuFraction, KVType: f.kvType,
		Sched: sched.Config{KVMemoryMB: max(f.kvMemoryMB, 0), HostSwapMB: swap, MaxBatchTokens: f.maxBatchTokens, MaxRunning: f.maxRunning,
			MaxStepLatency: stepLatency, EvictionGCInterval: f.gcInterval, ReserveHighPriority: f.reserveHigh, NoInterrupt: f.noInterrupt, Metrics: metrics,
			NoDrafts: f.speculation == string(contracts.SpeculationOff)},
		OnDeviceFallback: func(err error) { fmt.Fprintf(os.Stderr, "no CUDA device (%v); running on the CPU\n", err) },
	}, nil
}

// servingError names the flag behind an error of worker.OpenModels: a
// CUDA device that --device cuda asked for and that is not there.
func (f *schedFlags) servingError(err error) error {
	if f.device == device.CUDA && errors.Is(err, gpu.ErrBackendUnavailable) {
		return fmt.Errorf("--device cuda: %w", err)
	}
	return err
}

// open serves the named models as the flags say.
func (f *schedFlags) open(ctx context.Context, names []string, threads int, metrics *sched.Metrics) (*worker.Models, error) {
	cfg, err := f.models(names, threads, metrics)
	if err != nil {
		return nil, err
	}
	m, err := worker.OpenModels(ctx, cfg)
	return m, f.servingError(err)
}

// observed is the metrics of a worker process.
type observed struct {
	reg     *prometheus.Registry
	sched   *sched.Metrics
	metrics *worker.Metrics
}

// setupMetrics registers the scheduler's and the worker's metrics.
func setupMetrics() (*observed, error) {
	reg := prometheus.NewRegistry()
	sm, wm := sched.NewMetrics(), worker.NewMetrics()
	if err := errors.Join(sm.Register(reg), wm.Register(reg)); err != nil {
		return nil, err
	}
	return &observed{reg: reg, sched: sm, metrics: wm}, nil
}

// spareProcessor returns the compute threads to use for threads (0: one per
// processor) and, when they would take every processor the Go runtime has,
// gives the runtime one more: the compute threads keep their cores busy
// between kernels, and without a processor to spare NATS, the intake and
// the gateway wait for a matrix product to end before they answer (the
// operating system shares the cores between the threads instead, and wakes
// a thread that slept first).
func spareProcessor(threads int) int {
	procs := runtime.GOMAXPROCS(0)
	if threads <= 0 {
		threads = procs
	}
	if threads >= procs {
		runtime.GOMAXPROCS(threads + 1)
	}
	return threads
}

// hostSwap is --host-swap-mb as sched.Config.HostSwapMB: 0 or less turns
// the tier off (-1), where the config's 0 would mean its default.
func (f *schedFlags) hostSwap() int {
	if f.hostSwapMB <= 0 {
		return -1
	}
	return f.hostSwapMB
}
