package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestLostConsumerRecreated deletes a class's consumer under a running
// worker that provisions: the worker recreates it, a job of that class
// completes, and the recreation is counted.
func TestLostConsumerRecreated(t *testing.T) {
	t.Parallel()
	b, reg, id := loseConsumer(t, worker.Config{Provision: true}, contracts.PriorityNormal)
	if res := wait(t, b.Client, id); res.Status != contracts.StatusCompleted {
		t.Fatalf("job after its consumer was deleted: %+v", res)
	}
	if n := metricValue(t, reg, "zerolayer_intake_consumer_recreations_total", "normal", "short"); n != 1 {
		t.Errorf("recreations of normal/short = %v, want 1", n)
	}
	if n := metricValue(t, reg, "zerolayer_intake_consumer_missing", "normal", "short"); n != 0 {
		t.Errorf("normal/short missing = %v, want 0", n)
	}
}

// TestLostConsumerReported deletes a class's consumer under a worker that
// may not provision: the class is reported missing until an operator
// recreates the consumer, and then its queued job runs.
func TestLostConsumerReported(t *testing.T) {
	t.Parallel()
	b, reg, id := loseConsumer(t, worker.Config{ConsumerRecheck: 100 * time.Millisecond}, contracts.PriorityLow)
	natstest.Until(t, 30*time.Second, "low/short reported missing", func() bool {
		return metricValue(t, reg, "zerolayer_intake_consumer_missing", "low", "short") == 1
	})
	if n := metricValue(t, reg, "zerolayer_intake_consumer_missing", "high", "short"); n != 0 {
		t.Errorf("high/short missing = %v, want 0", n)
	}
	if err := contracts.EnsureStreams(context.Background(), b.Srv.JS, b.Streams); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, b.Client, id); res.Status != contracts.StatusCompleted {
		t.Fatalf("job after its consumer was recreated: %+v", res)
	}
	natstest.Until(t, 30*time.Second, "low/short no longer missing", func() bool {
		return metricValue(t, reg, "zerolayer_intake_consumer_missing", "low", "short") == 0
	})
	if n := metricValue(t, reg, "zerolayer_intake_consumer_recreations_total", "low", "short"); n != 0 {
		t.Errorf("a worker without provisioning recreated %v consumers", n)
	}
}

// loseConsumer starts a worker with cfg and metrics, deletes the consumer
// of prio's short bucket through the JetStream API, and submits a short
// job of that priority. It returns the bundle, the worker's metrics and
// the job's id.
func loseConsumer(t *testing.T, cfg worker.Config, prio contracts.Priority) (*workertest.Bundle, *prometheus.Registry, string) {
	t.Helper()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	reg := prometheus.NewRegistry()
	cfg.ID, cfg.Metrics = "w1", worker.NewMetrics()
	if err := cfg.Metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	b.StartWorkerConfig(t, workertest.NewExecutor(t), cfg)
	ctx := context.Background()
	if err := b.Srv.JS.DeleteConsumer(ctx, contracts.StreamJobs, contracts.ConsumerName(prio, contracts.BucketShort)); err != nil {
		t.Fatal(err)
	}
	id, err := b.Client.Submit(ctx, request("Once upon a time", 8, prio), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, reg, id
}

// metricValue returns the value of a gauge or counter with the given
// priority and bucket, 0 when it has none.
func metricValue(t *testing.T, reg *prometheus.Registry, name, prio, bucket string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range mt.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["priority"] == prio && l["bucket"] == bucket {
				return mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}
