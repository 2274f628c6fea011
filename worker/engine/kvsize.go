package engine

import "github.com/zerolayer/zerolayer/gpu"

// KV arena defaults, written once for everything that sizes an arena
// without being told: the in-order engine (Config), the scheduler
// (sched.Config) and the worker's model serving (worker.OpenModels), the
// gen and bench commands. Blocks hold gpu.DefaultBlockTokens (16)
// positions.
const (
	// DefaultKVMemoryMB is a scheduled model's KV arena on the CPU. On
	// CUDA the arena is sized from the device's free memory instead
	// (gpu.KVSizer).
	DefaultKVMemoryMB = 256
	// DefaultKVContexts is how many sequences of the full context the
	// in-order engine's arena holds.
	DefaultKVContexts = 2
)

// DefaultKVBlocks returns the in-order engine's default arena for a model
// of the given context: DefaultKVContexts full contexts in blocks of
// blockTokens positions (0: gpu.DefaultBlockTokens).
func DefaultKVBlocks(context, blockTokens int) int {
	if blockTokens <= 0 {
		blockTokens = gpu.DefaultBlockTokens
	}
	return DefaultKVContexts * ((context + blockTokens - 1) / blockTokens)
}
