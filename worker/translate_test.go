package worker

import (
	"testing"

	"github.com/zerolayer/zerolayer/worker/engine"
)

// TestOutcomeMemory: memory_allocated_mb is the job's own KV blocks and
// tool memory; the blocks it shared from the prefix cache are reported
// apart, in shared_memory_mb.
func TestOutcomeMemory(t *testing.T) {
	t.Parallel()
	res := &engine.Result{StopReason: engine.StopMaxTokens}
	res.Usage.KVBytes, res.Usage.ToolBytes, res.Usage.SharedKVBytes = 3<<20, 1<<19, 25<<20
	u := outcomeFrom(res, nil).Usage
	if u.MemoryAllocatedMB != 3.5 || u.SharedMemoryMB != 25 {
		t.Errorf("memory_allocated_mb %v, shared_memory_mb %v; want 3.5 and 25", u.MemoryAllocatedMB, u.SharedMemoryMB)
	}
}
