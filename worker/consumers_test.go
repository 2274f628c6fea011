package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestLostTenantConsumerRecreated deletes the consumer a tenant's jobs of
// one class are pulled through, under a running worker that does not
// provision: the worker makes it again (these consumers are made on
// demand) and the tenant's next job of that class completes.
func TestLostTenantConsumerRecreated(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorkerConfig(t, workertest.NewExecutor(t), worker.Config{ID: "w1"})
	ctx := context.Background()
	for i := range 2 {
		id, err := b.Client.Submit(ctx, request("Once upon a time", 8, contracts.PriorityNormal), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res := wait(t, b.Client, id); res.Status != contracts.StatusCompleted {
			t.Fatalf("job %d: %+v", i, res)
		}
		name := contracts.ModelConsumerName(contracts.PriorityNormal, contracts.BucketShort, "acme", workertest.ModelName)
		if err := b.Srv.JS.DeleteConsumer(ctx, contracts.StreamJobs, name); err != nil {
			t.Fatalf("the worker pulled acme's job through %s: %v", name, err)
		}
	}
}

// TestOldFormJobsServedAfterUpgrade: a job queued in the old subject form
// (zl.jobs.<priority>.<bucket>.<tenant>, id in Nats-Msg-Id) before an
// upgrade is served by its class consumer after it. A worker that may not
// provision refuses to start while that consumer is missing, and serves
// the job once an operator has recreated it.
func TestOldFormJobsServedAfterUpgrade(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	ctx := context.Background()
	cfg := contracts.StreamsConfig{}.WithDefaults()
	old := cfg.StreamConfigs()[0]
	old.Subjects = []string{"zl.jobs.*.*.*"}
	old.MaxMsgsPerSubject, old.Discard, old.DiscardNewPerSubject = -1, jetstream.DiscardOld, false
	if _, err := ns.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(request("Once upon a time", 8, contracts.PriorityLow))
	m := &nats.Msg{Subject: "zl.jobs.low.short.acme", Data: body, Header: nats.Header{contracts.HeaderMsgID: {"old-1"}}}
	if _, err := ns.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := contracts.EnsureStreams(ctx, ns.JS, cfg); err != nil {
		t.Fatal(err)
	}
	if err := ns.JS.DeleteConsumer(ctx, contracts.StreamJobs, contracts.ConsumerName(contracts.PriorityLow, contracts.BucketShort)); err != nil {
		t.Fatal(err)
	}
	nc, _ := ns.Connect(t)
	w, err := worker.New(nc, workertest.NewExecutor(t), worker.Config{ID: "w1", ConsumerRecheck: 100 * time.Millisecond,
		IdlePoll: 50 * time.Millisecond, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil {
		defer w.Stop(ctx)
		t.Fatal("a worker started without the class consumer it needs")
	}
	if err := contracts.EnsureStreams(ctx, ns.JS, cfg); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	res := waitResult(t, nc, "acme", "old-1")
	if res.Status != contracts.StatusCompleted {
		t.Fatalf("the old-form job: %+v", res)
	}
}

// waitResult waits for the stored result of tenant's job id.
func waitResult(t *testing.T, nc *nats.Conn, tenant, id string) *contracts.Result {
	t.Helper()
	var res contracts.Result
	natstest.Until(t, 30*time.Second, "the result of "+id, func() bool {
		m, err := contracts.LastMsg(context.Background(), nc, contracts.StreamResults, contracts.ResultsSubject(tenant, id))
		return err == nil && m != nil && json.Unmarshal(m.Data, &res) == nil
	})
	return &res
}

// TestWorkerReady: a worker is not ready before Start, is once started
// (consumers bound, model loaded, NATS up), and is not once its NATS
// connection is closed or it is stopping.
func TestWorkerReady(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	nc, _ := b.Srv.Connect(t)
	w, err := worker.New(nc, workertest.NewExecutor(t), worker.Config{ID: "w1", IdlePoll: 50 * time.Millisecond, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(); err == nil {
		t.Fatal("ready before Start")
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(); err != nil {
		t.Fatalf("not ready once started: %v", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(); err == nil {
		t.Fatal("ready after Stop")
	}

	w2, nc2 := b.StartWorker(t, workertest.NewExecutor(t), "w2")
	if err := w2.Ready(); err != nil {
		t.Fatalf("not ready once started: %v", err)
	}
	nc2.Close()
	if err := w2.Ready(); err == nil || !strings.Contains(err.Error(), "NATS") {
		t.Fatalf("ready with its NATS connection closed: %v", err)
	}
}
