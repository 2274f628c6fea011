package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestDeadWorkersJobRunsElsewhere: a job held by a worker that stopped
// heartbeating (here a client that pulled it and does nothing more, as a
// worker killed with -9 leaves it) is redelivered after the ack wait and
// completed by a live worker, once.
func TestDeadWorkersJobRunsElsewhere(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	b := workertest.Setup(t, contracts.StreamsConfig{AckWait: ackWait})
	ctx := context.Background()
	req := request("Once upon a time", 8, contracts.PriorityNormal)
	req.ID = "orphaned"
	if _, err := b.Client.Submit(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	_, js := b.Connect(t)
	cc := b.Streams.WithDefaults().ModelConsumerConfig(contracts.PriorityNormal, contracts.BucketShort, b.Client.Tenant(), workertest.ModelName)
	dead, err := js.CreateConsumer(ctx, contracts.StreamJobs, cc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dead.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("the dead worker's pull: %v", err)
	}
	took := time.Now()
	if route, err := contracts.ParseJobSubject(m.Subject()); err != nil || route.JobID != req.ID {
		t.Fatalf("the dead worker pulled %s (%v)", m.Subject(), err)
	}
	b.StartWorker(t, workertest.NewExecutor(t), "live")
	res := wait(t, b.Client, req.ID)
	after := time.Since(took)
	t.Logf("completed by the live worker %v after the dead one took it (ack wait %v)", after.Round(time.Millisecond), ackWait)
	if res.Status != contracts.StatusCompleted || res.Attempt != 2 || res.Usage == nil || res.Usage.WorkerID != "live" {
		t.Fatalf("result %+v", res)
	}
	// Generous: a loaded machine under the race detector. Without the
	// redelivery the job would wait for ever.
	if after > 20*ackWait {
		t.Errorf("redelivered and completed %v after its worker died, with an ack wait of %v", after, ackWait)
	}
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject(b.Client.Tenant()))); n != 1 {
		t.Fatalf("%d usage records, want 1", n)
	}
}

// TestSlowJobIsNotRedelivered: a job that takes several ack waits on a
// live worker, and one that waits behind it that long without running,
// are kept alive by the worker's heartbeats: neither is redelivered to the
// idle worker beside it, each runs once.
func TestSlowJobIsNotRedelivered(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	b := workertest.Setup(t, contracts.StreamsConfig{AckWait: ackWait})
	ctx := context.Background()
	slow := &slowExecutor{Executor: workertest.NewExecutor(t), hold: 3 * ackWait}
	b.StartWorkerConfig(t, slow, worker.Config{ID: "slow", Concurrency: 2})
	var ids []string
	for i := range 2 {
		req := request("Once upon a time", 6, contracts.PriorityNormal)
		req.ID = []string{"slow-job", "waiting-job"}[i]
		if _, err := b.Client.Submit(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, req.ID)
	}
	natstest.Until(t, 30*time.Second, "both jobs on the slow worker", func() bool { return slow.runs.Load() == 2 })
	idle := &slowExecutor{Executor: workertest.NewExecutor(t)}
	b.StartWorker(t, idle, "idle")
	for _, id := range ids {
		res := wait(t, b.Client, id)
		if res.Status != contracts.StatusCompleted || res.Attempt != 1 || res.Usage.WorkerID != "slow" {
			t.Errorf("%s: attempt %d on %s, status %s: want one attempt, on the slow worker", id, res.Attempt, res.Usage.WorkerID, res.Status)
		}
		starts := 0
		for _, ev := range events(t, b.Client, id) {
			if ev.Type == contracts.EventStarted {
				starts++
			}
		}
		if starts != 1 {
			t.Errorf("%s started %d times", id, starts)
		}
	}
	b.WaitDrained(t)
	if n, m := slow.runs.Load(), idle.runs.Load(); n != 2 || m != 0 {
		t.Errorf("the slow worker ran %d jobs, the idle one %d: want 2 and 0", n, m)
	}
	c, err := b.JS.Consumer(ctx, contracts.StreamJobs, contracts.ModelConsumerName(contracts.PriorityNormal, contracts.BucketShort, b.Client.Tenant(), workertest.ModelName))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := c.Info(ctx); err != nil || info.NumRedelivered != 0 {
		t.Errorf("consumer info %+v (%v): want no redelivery", info, err)
	}
}

// slowExecutor runs one job at a time, the first only after hold (a job
// slower than the ack wait; the next waits behind it without running).
type slowExecutor struct {
	worker.Executor
	hold time.Duration
	mu   sync.Mutex
	once sync.Once
	runs atomic.Int32
}

func (s *slowExecutor) Execute(ctx context.Context, job *worker.Job, sink worker.Sink) (*worker.Outcome, error) {
	s.runs.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	first := false
	s.once.Do(func() { first = true })
	if first && s.hold > 0 {
		select {
		case <-time.After(s.hold):
		case <-ctx.Done():
		}
	}
	return s.Executor.Execute(ctx, job, sink)
}
