package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
)

// TestDevExportsQueueMetrics: what `zerolayer dev` registers exports the
// queue depths of ZL_JOBS, ZL_DLQ and ZL_USAGE (zerolayer_queue_*), which
// the dashboard's queue panel and the queue alerts read, as a worker and
// billing do in production.
func TestDevExportsQueueMetrics(t *testing.T) {
	st := devstacktest.Start(t, devstack.Config{})
	reg := prometheus.NewRegistry()
	if err := registerDevCollectors(reg, st, nil); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string]bool{}
	up := false
	for _, mf := range mfs {
		switch mf.GetName() {
		case "zerolayer_queue_messages":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "stream" {
						streams[l.GetValue()] = true
					}
				}
			}
		case "zerolayer_queue_up":
			up = len(mf.GetMetric()) > 0 && mf.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	for _, s := range []string{contracts.StreamJobs, contracts.StreamDLQ, contracts.StreamUsage} {
		if !streams[s] {
			t.Errorf("no zerolayer_queue_messages of %s (got %v)", s, streams)
		}
	}
	if !up {
		t.Error("zerolayer_queue_up is not 1")
	}
}
