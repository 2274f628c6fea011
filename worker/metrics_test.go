package worker_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zerolayer/zerolayer/contracts"
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

// TestMetricsObserve: a finished job counts under its model (lower-cased),
// its time to first token by model, priority and bucket, and each of its
// inline tools by status; a job no model ran counts under no model.
func TestMetricsObserve(t *testing.T) {
	t.Parallel()
	m := worker.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	u := &contracts.Usage{Model: "Stories260K", Priority: contracts.PriorityHigh, Bucket: contracts.BucketShort, TimeToFirstTokenMs: 20, OutputTokens: 3, TimePerTokenMs: 2}
	worker.Observe(m, contracts.StatusCompleted, nil, u, []contracts.ToolReport{{Status: contracts.ToolStatusOK}, {Status: contracts.ToolStatusFailed}, {Status: contracts.ToolStatusOK}})
	worker.Observe(m, contracts.StatusFailed, &contracts.Error{Code: contracts.CodeInvalidRequest}, nil, nil)
	want := `
# HELP zerolayer_jobs_total Jobs finished, by status, error code and model.
# TYPE zerolayer_jobs_total counter
zerolayer_jobs_total{code="",model="stories260k",status="completed"} 1
zerolayer_jobs_total{code="invalid_request",model="",status="failed"} 1
# HELP zerolayer_tool_runs_total Inline tools run on finished jobs, by how they fared (ok, violated, failed, dropped; contracts.ToolStatus) and model.
# TYPE zerolayer_tool_runs_total counter
zerolayer_tool_runs_total{model="stories260k",status="failed"} 1
zerolayer_tool_runs_total{model="stories260k",status="ok"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "zerolayer_jobs_total", "zerolayer_tool_runs_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "zerolayer_time_to_first_token_seconds"); n != 1 {
		t.Errorf("%d TTFT series, want 1", n)
	}
}
