package sched

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
)

// Config configures a Scheduler.
type Config struct {
	// KVMemoryMB sizes the KV arena. Defaults to 0: sized from the model
	// and the machine by engine.DefaultKVArena (engine.DefaultSchedContexts
	// full contexts, more on a machine with memory to spare, capped by the
	// machine's memory, at least engine.DefaultKVMemoryMB);
	// Scheduler.KVArena says what was chosen and why. (worker.OpenModels
	// sizes a CUDA arena from the device's free memory through KVBlocks
	// instead.)
	KVMemoryMB int
	// KVBlocks, when set, is the exact number of blocks in the arena and
	// overrides KVMemoryMB (tests use it). Defaults to 0.
	KVBlocks int
	// NoDrafts turns off drafting (draft.go) for every job; otherwise a
	// job drafts unless its request says not to (engine.Request.NoDrafts).
	// Drafts change the forward passes a job takes, not its output.
	NoDrafts bool
	// MaxDraft bounds the tokens a sequence drafts in one step. Defaults
	// to 8.
	MaxDraft int
	// DraftThreshold, when above 0, is the acceptance probability above
	// which a draft token is fed, instead of the one measured from the
	// step times (draft.go): tests and benchmarks that must draft
	// whatever the machine's timing set it low.
	DraftThreshold float64
	// BlockTokens is the number of positions per KV block. Defaults to
	// gpu.DefaultBlockTokens (16).
	BlockTokens int
	// MaxBatchTokens bounds the prompt (prefill) tokens run in one step,
	// beside one decode token per running sequence, so a long prompt is
	// cut into chunks and never stalls running decodes. Defaults to 256.
	MaxBatchTokens int
	// MaxStepLatency bounds the time of a step that carries decodes: while
	// sequences are decoding, prompts are prefilled in chunks sized from
	// the measured cost of a step (a fixed part, a part per token and a
	// part per position attended, fitted over recent steps, with a margin
	// for their spread) so that the step stays under it, and
	// decodes keep their pace while a long prompt streams in. Steps
	// without decodes take full MaxBatchTokens chunks. Negative turns the
	// bound off. Defaults to 150 ms.
	MaxStepLatency time.Duration
	// MinPrefillTokens is the smallest chunk MaxStepLatency may cut a
	// step's prefill to, so prompts always progress; with more sequences
	// decoding than that, their number is the floor (prompts progress at
	// least at the decodes' pace). At most MaxBatchTokens. Defaults to 16.
	MinPrefillTokens int
	// MaxRunning caps the sequences in a batch. Defaults to 64.
	MaxRunning int
	// HostSwapMB sizes the host tier preempted sequences' blocks are
	// copied to; when it is full they are dropped and recomputed on
	// resume. Negative disables swapping. Defaults to 256.
	HostSwapMB int
	// HostSwapBlocks, when set, is the exact number of blocks the host
	// tier holds and overrides HostSwapMB's size (tests use it; a
	// negative HostSwapMB still disables the tier). Defaults to 0.
	HostSwapBlocks int
	// RunQuantum is the number of tokens a preempted job generates after
	// it resumes before it may be evicted for memory again (while a job
	// of its class outside its quantum can go instead), and the shortest
	// look-ahead of admission: a job is admitted only when the arena
	// holds the next RunQuantum tokens (more after evictions for memory,
	// up to the context) of every running job and of it. Defaults to
	// BlockTokens.
	RunQuantum int
	// EvictionGCInterval is how long swapped blocks are kept for a
	// sequence that has not resumed; after it they are released and the
	// sequence recomputes. Defaults to 30 seconds.
	EvictionGCInterval time.Duration
	// ReserveHighPriority admits high-priority jobs with their worst case
	// reserved (as low_latency jobs always are). Defaults to false.
	ReserveHighPriority bool
	// WeightRemaining and WeightTemperature weigh a victim's
	// priority_score = w_r × remaining_tokens + w_t × temperature; the
	// lowest score is evicted first. Default 0.7 and 0.3.
	WeightRemaining, WeightTemperature float64
	// AgingAfter raises a waiting job by one class for every AgingAfter it
	// has waited, so low-priority jobs always finish. Defaults to 5 seconds.
	AgingAfter time.Duration
	// DisablePrefixCache turns off sharing of identical prompt prefixes.
	DisablePrefixCache bool
	// NoFiller turns off admitting one job that does not fit whole by its
	// first prefill chunk when memory would otherwise sit idle. Defaults
	// to false.
	NoFiller bool
	// NoInterrupt keeps a step running when a high-priority job arrives,
	// instead of abandoning it within half a layer unless it carries a
	// high-priority prompt (only synchronous backends, the CPU, can
	// abandon a step).
	// Defaults to false.
	NoInterrupt bool
	// WholeBlocks keeps every layer of a position in one block, so a
	// sliding-window layer holds its blocks for the whole sequence
	// instead of giving back those its window has passed (see pages):
	// the layout before windows were reclaimed, kept to measure against.
	// Defaults to false. Without windows it changes nothing.
	WholeBlocks bool
	// Metrics, if set, receives the scheduler's measurements.
	Metrics *Metrics
	// Logger receives the scheduler's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	setI := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setI(&c.BlockTokens, gpu.DefaultBlockTokens)
	setI(&c.MaxBatchTokens, 256)
	setI(&c.MaxRunning, 64)
	setI(&c.MinPrefillTokens, 16)
	setI(&c.MaxDraft, 8)
	if c.MaxStepLatency == 0 {
		c.MaxStepLatency = 150 * time.Millisecond
	}
	setI(&c.HostSwapMB, 256)
	setI(&c.RunQuantum, c.BlockTokens)
	if c.EvictionGCInterval == 0 {
		c.EvictionGCInterval = 30 * time.Second
	}
	if c.WeightRemaining == 0 && c.WeightTemperature == 0 {
		c.WeightRemaining, c.WeightTemperature = 0.7, 0.3
	}
	if c.AgingAfter == 0 {
		c.AgingAfter = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.KVMemoryMB < 0:
		return fmt.Errorf("sched: KVMemoryMB %d: must be at least 1 (0: sized from the model and the machine)", c.KVMemoryMB)
	case c.BlockTokens < 1:
		return fmt.Errorf("sched: BlockTokens %d: must be at least 1", c.BlockTokens)
	case c.RunQuantum < 1:
		return fmt.Errorf("sched: RunQuantum %d: must be at least 1 token", c.RunQuantum)
	case c.MaxBatchTokens < 1 || c.MaxRunning < 1:
		return fmt.Errorf("sched: MaxBatchTokens and MaxRunning must be at least 1")
	case c.MinPrefillTokens < 1:
		return fmt.Errorf("sched: MinPrefillTokens %d: must be at least 1 token (leave it 0 for the default, 16)", c.MinPrefillTokens)
	}
	return nil
}
