package worker_test

import (
	"context"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestArenaPressureThroughNATS is issue 12's thrash scenario end to end:
// 30 ordinary jobs whose worst cases (about 9 blocks each) together
// overflow a 21-block arena, submitted at once through NATS, plus two
// low_latency jobs among them. Every job is served, the ordinary jobs are
// preempted at most 0.03 times per generated token (issue 12 saw 4.5; runs
// here measure 0.002–0.015, the benchmark's target is 0.01 on the 134M
// model: the bound is twice the worst run seen, for loaded machines), and
// the low_latency jobs never.
func TestArenaPressureThroughNATS(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	exec := workertest.NewSchedExecutor(t, sched.Config{KVBlocks: 21})
	b.StartWorkerConfig(t, exec, worker.Config{ID: "w1", Concurrency: 64})
	var ids, ll []string
	for i := range 32 {
		r := greedy("Once upon a time", 120, contracts.PriorityNormal)
		c := b.Client
		if i%16 == 15 {
			r.Memory = &contracts.MemoryOptions{LowLatency: true}
			c = b.Other
		}
		id, err := c.Submit(ctx, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c == b.Other {
			ll = append(ll, id)
		} else {
			ids = append(ids, id)
		}
	}
	preempted, out := 0, 0
	for _, id := range ids {
		r := wait(t, b.Client, id)
		if r.Status != contracts.StatusCompleted || r.Usage == nil {
			t.Fatalf("job %s: %+v", id, r)
		}
		preempted += r.Usage.Preemptions
		out += r.Usage.OutputTokens
	}
	for _, id := range ll {
		r := wait(t, b.Other, id)
		if r.Status != contracts.StatusCompleted || r.Usage == nil {
			t.Fatalf("low_latency job %s: %+v", id, r)
		}
		if r.Usage.Preemptions != 0 {
			t.Errorf("low_latency job %s was preempted %d times", id, r.Usage.Preemptions)
		}
	}
	per := float64(preempted) / float64(out)
	t.Logf("%d ordinary jobs: %d preemptions for %d output tokens (%.4f per token)", len(ids), preempted, out, per)
	if per > 0.03 {
		t.Errorf("%.4f preemptions per generated token, want ≤ 0.03", per)
	}
}
