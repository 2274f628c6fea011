package cuda

import "github.com/zerolayer/zerolayer/gpu"

// Config configures the CUDA backend.
type Config struct {
	// Device is the CUDA device ordinal (as CUDA enumerates devices, after
	// CUDA_VISIBLE_DEVICES). Defaults to 0.
	Device int
	// FlushOps is, with NoGraphs, how many queued operations are handed to
	// the device's engine goroutine at once; Sync and Read hand over the
	// rest. Defaults to 64.
	FlushOps int
	// NoGraphs turns off CUDA graphs: every kernel is launched on its own,
	// also when a step repeats (see graph.go). Defaults to false.
	NoGraphs bool
}

// WithDefaults returns the config with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.FlushOps <= 0 {
		c.FlushOps = 64
	}
	return c
}

// BlockMove moves one KV block between the device arena and a HostPool:
// From is the source block (device block for SwapOut, host slot for
// SwapIn), To the destination.
type BlockMove = gpu.BlockMove

// Stats counts the work a backend's engine did (Backend.Stats).
type Stats struct {
	// Launches counts kernels launched one by one.
	Launches int64
	// GraphLaunches counts CUDA graph launches, each replaying a step's
	// kernels; GraphCaptures the graphs made, GraphFailures the captures
	// that failed (their segments are launched one by one).
	GraphLaunches, GraphCaptures, GraphFailures int64
	// LastGraphError is the error of the last failed capture.
	LastGraphError string
}
