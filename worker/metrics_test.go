package worker_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zerolayer/zerolayer/worker"
)

func TestMetricsRegister(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if err := worker.NewMetrics().Register(reg); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("%d metric families gathered", n)
	}
	if err := worker.NewMetrics().Register(reg); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("registering twice: %v", err)
	}
}
