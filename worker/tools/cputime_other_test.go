//go:build !linux

package tools

import "time"

var processStart = time.Now()

// threadCPU falls back to the wall clock.
func threadCPU() time.Duration { return time.Since(processStart) }
