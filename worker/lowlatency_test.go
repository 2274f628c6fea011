package worker_test

import (
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestLowLatencyModeThroughNATS: a <tool name="low_latency_mode"/> block
// in the system prompt, submitted through the producer and NATS, gets the
// job admitted reserved (the scheduler's zerolayer_admissions_total), the
// same as memory.low_latency, and is no prompt text: the producer and the
// worker count the prompt without it.
func TestLowLatencyModeThroughNATS(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	metrics := sched.NewMetrics()
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{Metrics: metrics}), worker.Config{ID: "w1", Concurrency: 2})
	const system = "You tell short stories.\n"
	run := func(sys string, mem *contracts.MemoryOptions) *contracts.Result {
		t.Helper()
		r := greedy("Once upon a time", 16, contracts.PriorityNormal)
		r.System, r.Memory = sys, mem
		id, err := b.Client.Submit(t.Context(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := wait(t, b.Client, id)
		if res.Status != contracts.StatusCompleted || res.Usage == nil {
			t.Fatalf("%q: %+v", sys, res)
		}
		return res
	}
	admissions := func() (reserved, optimistic float64) { return metrics.Admissions(true), metrics.Admissions(false) }

	plain := run(system, nil)
	if r, o := admissions(); r != 0 || o != 1 {
		t.Fatalf("a plain job: %v reserved, %v optimistic admissions", r, o)
	}
	directive := run(system+"<tool name=\"low_latency_mode\"/>\n", nil)
	if r, o := admissions(); r != 1 || o != 1 {
		t.Fatalf("low_latency_mode: %v reserved, %v optimistic admissions; want it reserved", r, o)
	}
	field := run(system, &contracts.MemoryOptions{LowLatency: true})
	if r, o := admissions(); r != 2 || o != 1 {
		t.Fatalf("memory.low_latency: %v reserved, %v optimistic admissions", r, o)
	}
	// The block is not prompt text: same prompt, same output.
	if directive.Usage.InputTokens != plain.Usage.InputTokens || directive.Text != plain.Text || field.Text != plain.Text {
		t.Errorf("input tokens %d with the block, %d without; texts %q, %q", directive.Usage.InputTokens, plain.Usage.InputTokens, directive.Text, plain.Text)
	}
	r := greedy("Once upon a time", 16, contracts.PriorityNormal)
	r.System = system + "<tool name=\"low_latency_mode\"/>\n"
	n1, err := b.Client.PromptTokens(r)
	if err != nil {
		t.Fatal(err)
	}
	r.System = system
	if n2, _ := b.Client.PromptTokens(r); n1 != n2 || n1 != plain.Usage.InputTokens {
		t.Errorf("the producer counts %d prompt tokens with the block, %d without, the worker %d", n1, n2, plain.Usage.InputTokens)
	}
	// A contradiction is refused at submit.
	r.System = system + "<tool name=\"low_latency_mode\"/>"
	yes := true
	r.Memory = &contracts.MemoryOptions{Preemptible: &yes}
	if _, err := b.Client.Submit(t.Context(), r, nil); err == nil {
		t.Error("low_latency_mode with memory.preemptible true was accepted")
	}
}
