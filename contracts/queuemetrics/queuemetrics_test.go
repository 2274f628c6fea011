package queuemetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// gather returns every sample of reg by name and label values (in the
// order of the label names).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	return got
}

// TestCollector: queued jobs count in their class consumer's group (its
// class-and-tenant consumers added up), a fetched and unacknowledged job
// as ack-pending, a dead letter in ZL_DLQ's messages; with the server
// gone, the scrape answers within its timeout with zerolayer_queue_up 0.
func TestCollector(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	ctx := t.Context()
	if err := contracts.EnsureStreams(ctx, ns.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := contracts.StreamsConfig{}.WithDefaults()
	p, b := contracts.PriorityHigh, contracts.BucketShort
	cons, err := ns.JS.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, cfg.TenantConsumerConfig(p, b, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := ns.JS.Publish(ctx, fmt.Sprintf("%s%s.%s.acme.job%d", contracts.SubjectJobsPrefix, p, b, i), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ns.JS.Publish(ctx, contracts.DLQSubject(p, b, "acme"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}

	c := NewCollector(ns.JS, contracts.StreamJobs, contracts.StreamDLQ, "ZL_NOT_THERE")
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	class := contracts.ConsumerName(p, b)
	wants := map[string]float64{
		"zerolayer_queue_up":                                 1,
		"zerolayer_queue_messages/ZL_JOBS":                   3,
		"zerolayer_queue_messages/ZL_DLQ":                    1,
		"zerolayer_queue_pending/" + class + "/ZL_JOBS":      2,
		"zerolayer_queue_ack_pending/" + class + "/ZL_JOBS":  1,
		"zerolayer_queue_redelivered/" + class + "/ZL_JOBS":  0,
		"zerolayer_queue_consumers/" + class + "/ZL_JOBS":    2,
		"zerolayer_queue_pending/jobs-low-long/ZL_JOBS":      0,
		"zerolayer_queue_consumers/jobs-normal-long/ZL_JOBS": 1,
	}
	// A consumer's counts settle a moment after the fetch on a loaded
	// machine: scrape again until they do (or a few seconds pass).
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = gather(t, reg)
		settled := true
		for key, want := range wants {
			if v, ok := got[key]; !ok || v != want {
				settled = false
			}
		}
		if settled || time.Now().After(deadline) {
			break
		}
	}
	for key, want := range wants {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for key := range got {
		if strings.Contains(key, "acme") || strings.Contains(key, "ZL_NOT_THERE") {
			t.Errorf("unexpected series %s", key)
		}
	}

	ns.Server.Shutdown()
	ns.Server.WaitForShutdown()
	c.timeout = 500 * time.Millisecond
	start := time.Now()
	got = gather(t, reg)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("scrape with the server down took %v", d)
	}
	if v, ok := got["zerolayer_queue_up"]; !ok || v != 0 {
		t.Errorf("zerolayer_queue_up = %v (present %v) with the server down, want 0", v, ok)
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"jobs-high-short":           "jobs-high-short",
		"jobs-high-short-acme":      "jobs-high-short",
		"jobs-low-long-globex-corp": "jobs-low-long",
		"billing-ingest":            "billing-ingest",
		"jobs-high-shortish":        "jobs-high-shortish",
		"jobs-normal-medium-a_b-9":  "jobs-normal-medium",
	} {
		if got := Group(in); got != want {
			t.Errorf("Group(%q) = %q, want %q", in, got, want)
		}
	}
}
