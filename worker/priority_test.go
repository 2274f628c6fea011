package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestHighPriorityBehindBacklogThroughNATS is issue 12's priority scenario
// end to end: a low-priority backlog fills every slot of the worker's
// batch and waits in JetStream behind it; a high-priority job submitted
// then is pulled into the full worker and admitted (a low job swapped out
// for it) before any of the low jobs that were waiting when it came —
// not, as before, after the running low jobs end. The bound is stated in
// admissions, not time: at most the low jobs admitted in the step in
// flight when it arrived (one step's admissions, here at most the batch).
func TestHighPriorityBehindBacklogThroughNATS(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	metrics := sched.NewMetrics()
	const batch = 4
	exec := workertest.NewSchedExecutor(t, sched.Config{MaxRunning: batch, Metrics: metrics})
	b.StartWorkerConfig(t, exec, worker.Config{ID: "w1", Concurrency: 64})
	low := submitN(t, b.Client, 40, func() *contracts.JobRequest { return greedy("Once upon a time", 300, contracts.PriorityLow) })
	natstest.Until(t, 30*time.Second, "the low backlog in every slot", func() bool { return metrics.TenantTokens("acme") >= 10*batch })
	submitted := time.Now()
	id, err := b.Other.Submit(ctx, greedy("Once upon a time", 8, contracts.PriorityHigh), nil)
	if err != nil {
		t.Fatal(err)
	}
	high := wait(t, b.Other, id)
	if high.Status != contracts.StatusCompleted || high.Usage == nil {
		t.Fatalf("the high-priority job: %+v", high)
	}
	admitted := func(u *contracts.Usage) time.Time {
		return u.CreatedAt.Add(time.Duration(u.QueueMs * float64(time.Millisecond)))
	}
	at := admitted(high.Usage)
	before, after := 0, 0
	for _, lid := range low {
		r := wait(t, b.Client, lid)
		if r.Usage == nil {
			t.Fatalf("low job %s has no usage: %+v", lid, r)
		}
		switch a := admitted(r.Usage); {
		case a.After(submitted) && a.Before(at):
			before++ // waiting when the high job came, admitted ahead of it
		case a.After(at):
			after++
		}
	}
	t.Logf("high-priority job: queue %.1f ms, first token after %.1f ms more; %d low jobs admitted between its submission and its admission, %d after (preemptions of low jobs are in their usage)",
		high.Usage.QueueMs, high.Usage.TimeToFirstTokenMs, before, after)
	if before > batch {
		t.Errorf("%d low-priority jobs were admitted between the high-priority job's submission and its admission, want at most %d", before, batch)
	}
	if after < len(low)/2 {
		t.Errorf("only %d of %d low jobs were admitted after the high one: it waited for the backlog", after, len(low))
	}
}
