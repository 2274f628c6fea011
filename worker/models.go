package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// Executor kinds of ModelsConfig.Executor.
const (
	// ExecutorSched serves each model through a scheduler: continuous
	// batching, a paged KV arena, admission by memory, preemption.
	ExecutorSched = "sched"
	// ExecutorInOrder runs one job at a time on each model's engine.
	ExecutorInOrder = "inorder"
)

// ModelsConfig says which models a worker serves and how; OpenModels
// serves them.
type ModelsConfig struct {
	// Models name the models to serve, each a path to a GGUF file or a
	// name looked up in ModelDirs (store.Resolve). A model is served
	// under ServedName of what names it. Required.
	Models []string
	// ModelDirs are the folders names are looked up in, the first first.
	// Defaults to none: only paths resolve.
	ModelDirs []string
	// Device is the backend the models run on: "cpu", "cuda" (fail
	// without a usable GPU) or "auto" (CUDA when a device opens, else the
	// CPU); see gpu/device. Defaults to "cpu".
	Device string
	// Threads is the CPU backend's thread count. Defaults to 0: one per
	// CPU.
	Threads int
	// Executor is ExecutorSched or ExecutorInOrder. Defaults to
	// ExecutorSched.
	Executor string
	// Sched configures every model's scheduler (ExecutorSched). With
	// neither KVMemoryMB nor KVBlocks set, the arena is sized on the CPU
	// from the model's context and the machine's memory
	// (engine.DefaultKVArena: 4 full contexts, more on a large machine,
	// capped by a small one, at least engine.DefaultKVMemoryMB), and on a
	// backend that sizes arenas (gpu.KVSizer: CUDA) GPUMemoryFraction of
	// the device memory free after each model's weights, divided by the
	// number of models. Describe says what each got.
	// Sched.Metrics go to the first model's scheduler only (one set per
	// process). Zero fields take the scheduler's defaults.
	Sched sched.Config
	// GPUMemoryFraction is the share of the device's free memory, after
	// the weights, given to the KV arenas on CUDA. Defaults to 0.9.
	GPUMemoryFraction float64
	// KVType is the element type of every model's KV cache ("f16",
	// "f32"; llama.cpp's --cache-type-k/-v). Defaults to "": the
	// backend's (gpu.KVTypes: F16 on the CPU, F32 on CUDA).
	KVType string
	// OnDeviceFallback, if set, is called with the reason when Device is
	// "auto" and no CUDA device opens; the models then run on the CPU.
	// Defaults to nil.
	OnDeviceFallback func(reason error)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ModelsConfig) WithDefaults() ModelsConfig {
	if c.Device == "" {
		c.Device = device.CPU
	}
	if c.Executor == "" {
		c.Executor = ExecutorSched
	}
	if c.GPUMemoryFraction == 0 {
		c.GPUMemoryFraction = 0.9
	}
	return c
}

func (c ModelsConfig) validate() error {
	if len(c.Models) == 0 {
		return errors.New("worker: no model to serve: name at least one in ModelsConfig.Models")
	}
	if err := device.Check(c.Device); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if c.Executor != ExecutorSched && c.Executor != ExecutorInOrder {
		return fmt.Errorf("worker: executor %q: want %s or %s", c.Executor, ExecutorSched, ExecutorInOrder)
	}
	if !(c.GPUMemoryFraction > 0 && c.GPUMemoryFraction <= 1) {
		return fmt.Errorf("worker: GPU memory fraction %g: want a share in (0, 1]", c.GPUMemoryFraction)
	}
	if name, dup := DuplicateModel(c.Models); dup {
		return fmt.Errorf("worker: model %q given twice", name)
	}
	return nil
}

// ServedName is the name a model is served under: the name given,
// lower-cased, or the lower-cased file name without .gguf when a path is
// given (for a split model's first file without "-00001-of-0000N":
// store.ModelName).
func ServedName(arg string) string {
	if strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".gguf") {
		return strings.ToLower(store.ModelName(arg))
	}
	return strings.ToLower(arg)
}

// DuplicateModel returns the first served name that two of models share.
func DuplicateModel(models []string) (name string, dup bool) {
	seen := map[string]bool{}
	for _, m := range models {
		n := ServedName(m)
		if seen[n] {
			return n, true
		}
		seen[n] = true
	}
	return "", false
}

// Models is a set of models served on one backend: what a worker process
// runs. Close releases it.
type Models struct {
	be        gpu.Backend
	served    []*ServedModel    // every model, in the order given
	scheduled []*ScheduledModel // with ExecutorSched
	paths     map[string]string // served name → file
	exec      Executor
	conc      int
	closeOnce sync.Once
}

// OpenModels serves the models of cfg. It is the one place where a
// worker's serving policy is decided:
//
//   - The backend is cfg.Device, opened by gpu/device.
//   - Each model is resolved (store.Resolve in cfg.ModelDirs), loaded on
//     that backend, and served under ServedName.
//   - With ExecutorSched each model gets a scheduler of cfg.Sched, started
//     here, its KV arena sized as ModelsConfig.Sched says; with
//     ExecutorInOrder an engine whose arena holds
//     engine.DefaultKVContexts full contexts.
//   - The intake should hold Concurrency jobs: with the scheduler, which
//     decides what it pulls (sched.Scheduler.Room), enough that slots
//     never gate it — a full batch, as many preempted jobs waiting to
//     resume, and the look-ahead of every class (2 × MaxRunning + 3 ×
//     (LookAhead + LookAheadTenants)); one
//     at a time with the in-order executor.
//
// On error everything opened so far is closed.
func OpenModels(ctx context.Context, cfg ModelsConfig) (_ *Models, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	be, err := device.Open(cfg.Device, cfg.Threads, cfg.OnDeviceFallback)
	if err != nil {
		return nil, err
	}
	m := &Models{be: be, paths: map[string]string{}, conc: 1}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	for i, arg := range cfg.Models {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path, err := store.Resolve(arg, cfg.ModelDirs)
		if err != nil {
			return nil, err
		}
		l, err := engine.Load(path, be)
		if err != nil {
			return nil, err
		}
		if cfg.KVType != "" {
			t, err := gpu.ParseDType(cfg.KVType)
			if err == nil {
				err = l.Model.SetKVType(t)
			}
			if err != nil {
				return nil, fmt.Errorf("KV cache type %q: %w", cfg.KVType, err)
			}
		}
		sm := &ServedModel{Name: ServedName(arg), Loaded: l}
		m.served = append(m.served, sm)
		m.paths[sm.Name] = path
		if cfg.Executor == ExecutorInOrder {
			if sm.Engine, err = engine.New(l.Model, l.Tokenizer, engine.Config{}); err != nil {
				return nil, err
			}
			continue
		}
		sc := cfg.Sched
		if i > 0 {
			sc.Metrics = nil // one set of scheduler metrics per process
		}
		if ks, ok := be.(gpu.KVSizer); ok && sc.KVMemoryMB == 0 && sc.KVBlocks == 0 {
			// On a GPU the arena takes a share of the memory left after
			// the weights.
			if sc.KVBlocks, err = ks.KVBlocks(sched.ArenaConfig(l.Model, sc), cfg.GPUMemoryFraction/float64(len(cfg.Models))); err != nil {
				return nil, err
			}
		}
		s, err := sched.New(l.Model, l.Tokenizer, sc)
		if err != nil {
			return nil, err
		}
		if err := s.Start(ctx); err != nil {
			return nil, err
		}
		m.scheduled = append(m.scheduled, &ScheduledModel{Name: sm.Name, Loaded: l, Scheduler: s})
	}
	if cfg.Executor == ExecutorInOrder {
		m.exec = NewInOrderExecutor(be.Name(), m.served...)
	} else {
		m.exec = NewSchedExecutor(be.Name(), contracts.Buckets{}, m.scheduled...)
		m.conc = 2*cfg.Sched.WithDefaults().MaxRunning + 3*(sched.LookAhead+sched.LookAheadTenants)
	}
	return m, nil
}

// Executor returns the executor that runs jobs on the models.
func (m *Models) Executor() Executor { return m.exec }

// Concurrency is how many jobs the intake should hold (Config.Concurrency)
// for this executor.
func (m *Models) Concurrency() int { return m.conc }

// Names lists the served names, in the order the models were given.
func (m *Models) Names() []string {
	names := make([]string, len(m.served))
	for i, sm := range m.served {
		names[i] = sm.Name
	}
	return names
}

// EmbeddingOnly reports whether the served model name only embeds (an
// encoder such as BERT).
func (m *Models) EmbeddingOnly(name string) bool {
	for _, sm := range m.served {
		if sm.Name == name {
			return sm.Loaded.Model.Encoder
		}
	}
	return false
}

// Paths maps each served name to its model file (what producers and the
// gateway tokenize with).
func (m *Models) Paths() map[string]string { return m.paths }

// Describe lists the models for logs: "name (file), …", with each
// scheduled model's KV arena and why it is that size ("name (file; KV
// arena 1,152 MB: 4 contexts of 8,192 tokens)").
func (m *Models) Describe() string {
	arenas := map[string]string{}
	for _, sm := range m.scheduled {
		arenas[sm.Name] = "; " + sm.Scheduler.KVArena().String()
	}
	parts := make([]string, len(m.served))
	for i, sm := range m.served {
		parts[i] = fmt.Sprintf("%s (%s%s)", sm.Name, m.paths[sm.Name], arenas[sm.Name])
	}
	return strings.Join(parts, ", ")
}

// OnGPU reports whether the models run on the CUDA backend.
func (m *Models) OnGPU() bool { return device.IsCUDA(m.be) }

// Close stops the schedulers and releases the models and the backend. The
// worker using the executor must be stopped first. Safe to call twice.
func (m *Models) Close() {
	m.closeOnce.Do(func() {
		for _, s := range m.scheduled {
			// Stop waits for the loop, which answers every job it holds.
			s.Scheduler.Stop(context.Background())
		}
		for _, sm := range m.served {
			sm.Loaded.Close()
		}
		m.be.Close()
	})
}
