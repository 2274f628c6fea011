package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatchSpreadsOverIdleWorkers: a batch of medium prompts submitted at
// once to three idle workers. A worker pulls no more jobs than its next
// step can start (its prefill budget for prompts of the bucket's smallest
// size, sched.Scheduler.Room), so the first worker to pull does not take
// the batch to work through alone while the others idle: no worker runs
// more than half of it.
func TestBatchSpreadsOverIdleWorkers(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	for _, id := range []string{"w1", "w2", "w3"} {
		exec := workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 32, KVMemoryMB: 32})
		b.StartWorkerConfig(t, exec, worker.Config{ID: id, Concurrency: 64})
	}
	// ~300-token prompts: the medium bucket (64-512 tokens), four a step
	// in the default 256-token prefill budget.
	prompt := strings.Repeat("Once upon a time there was a little cat who liked to play in the garden. ", 20)
	var reqs []*contracts.JobRequest
	for range 48 {
		reqs = append(reqs, greedy(prompt, 8, contracts.PriorityNormal))
	}
	ids, errs := b.Client.SubmitMany(context.Background(), reqs, nil)
	by := map[string]int{}
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		r := wait(t, b.Client, id)
		if r.Status != contracts.StatusCompleted || r.Usage == nil {
			t.Fatalf("job %s: %+v", id, r)
		}
		if r.Usage.InputTokens < 64 {
			t.Fatalf("a prompt of %d tokens is not in the medium bucket", r.Usage.InputTokens)
		}
		by[r.Usage.WorkerID]++
	}
	t.Logf("jobs per worker: %v", by)
	for w, n := range by {
		if n > len(ids)/2 {
			t.Errorf("worker %s ran %d of %d jobs submitted at once to three idle workers: %v", w, n, len(ids), by)
		}
	}
}
