package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts/natstest"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// failingTool fails every output of stories260K at its end: retry_on_fail
// with no retries left on a marker every story contains.
func failingTool() contracts.Tool {
	return tool(contracts.ToolRetryOnFail, map[string]any{"output_contains": []string{"e"}, "max_retries": 0})
}

// TestToolFailureLadderThroughNATS runs each rung of on_tool_failure on
// the real model, submitted through the producer: fail ends the job with
// the tool's error; retry_without_tool drops the tool and completes;
// fallback answers fallback_response, marked as such. Every rung keeps
// tool_failure_reason in the result and the usage record, and the usage
// bills what ran (the failed attempt's tokens included).
func TestToolFailureLadderThroughNATS(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	metrics := worker.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{}), worker.Config{ID: "w1", Concurrency: 4, Metrics: metrics})
	const fallback = "The story service is busy; try again."
	mk := func(policy contracts.OnToolFailure, fb string) *contracts.JobRequest {
		r := greedy("Once upon a time", 24, contracts.PriorityNormal)
		r.Tools = []contracts.Tool{failingTool()}
		r.OnToolFailure, r.FallbackResponse = policy, fb
		return r
	}
	ids := map[contracts.OnToolFailure]string{}
	for _, p := range []contracts.OnToolFailure{contracts.OnToolFailureFail, contracts.OnToolFailureRetryWithoutTool, contracts.OnToolFailureFallback} {
		fb := ""
		if p == contracts.OnToolFailureFallback {
			fb = fallback
		}
		id, err := b.Client.Submit(t.Context(), mk(p, fb), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = id
	}
	results := map[contracts.OnToolFailure]*contracts.Result{}
	for p, id := range ids {
		r := wait(t, b.Client, id)
		results[p] = r
		if r.Usage == nil {
			t.Fatalf("%s: no usage: %+v", p, r)
		}
		if !strings.HasPrefix(r.ToolFailureReason, "retry_on_fail: TOOL_VALIDATION_FAILED: ") || r.Usage.ToolFailureReason != r.ToolFailureReason {
			t.Errorf("%s: tool_failure_reason %q, usage %q", p, r.ToolFailureReason, r.Usage.ToolFailureReason)
		}
		if r.Usage.OutputTokens == 0 {
			t.Errorf("%s: the failed attempt's tokens are not billed: %+v", p, r.Usage)
		}
	}
	if r := results[contracts.OnToolFailureFail]; r.Status != contracts.StatusFailed || r.Error == nil || r.Error.Code != contracts.CodeToolExecutionFailed || r.Fallback {
		t.Errorf("fail: %+v", r)
	}
	if r := results[contracts.OnToolFailureRetryWithoutTool]; r.Status != contracts.StatusCompleted || r.Fallback || r.Text == "" ||
		len(r.ToolReport) != 1 || r.ToolReport[0].Status != contracts.ToolStatusDropped {
		t.Errorf("retry_without_tool: %+v", r)
	}
	r := results[contracts.OnToolFailureFallback]
	if r.Status != contracts.StatusCompleted || !r.Fallback || r.Text != fallback || len(r.TokenIDs) != 0 || r.StopReason != contracts.StopEndTurn ||
		r.Error != nil || !r.Usage.Fallback || r.Usage.Status != contracts.StatusCompleted {
		t.Errorf("fallback: %+v", r)
	}
	// The fallback job ran its failed attempt: it is billed the fail
	// job's prompt and the tokens it generated (checked above), not the
	// fallback text, which it did not generate. (The two ran in one batch,
	// so their output lengths are not compared.)
	if f := results[contracts.OnToolFailureFail].Usage; r.Usage.InputTokens != f.InputTokens || r.Usage.OutputTokens > 24 {
		t.Errorf("fallback billed %d+%d tokens, the failed job %d+%d", r.Usage.InputTokens, r.Usage.OutputTokens, f.InputTokens, f.OutputTokens)
	}
	// The usage records on ZL_USAGE carry the reason and the mark.
	n := 0
	for _, m := range workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme")) {
		u, err := contracts.DecodeUsage(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		if u.ToolFailureReason == "" || u.Fallback != (u.JobID == ids[contracts.OnToolFailureFallback]) {
			t.Errorf("usage record %s: reason %q fallback %v", u.JobID, u.ToolFailureReason, u.Fallback)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d usage records, want 3", n)
	}
	// The worker counts the fallback (after its ack: poll).
	natstest.Until(t, 10*time.Second, "the fallback counted", func() bool { return fallbacks(reg) == 1 })
}

// fallbacks is the worker's zerolayer_tool_fallbacks_total, summed over
// its models.
func fallbacks(reg *prometheus.Registry) float64 {
	mfs, _ := reg.Gather()
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "zerolayer_tool_fallbacks_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestDegrade covers the rungs applyToolFailure decides, the last one
// included: retry_without_tool whose new attempt failed too answers the
// fallback when there is one, and fails the job when there is none.
func TestDegrade(t *testing.T) {
	t.Parallel()
	first := &contracts.Error{Code: contracts.CodeToolExecutionFailed, Tool: "regex_matcher", ToolCode: contracts.ToolStepBudget, Message: "step budget exhausted"}
	second := &contracts.Error{Code: contracts.CodeToolExecutionFailed, Tool: "json_validator", ToolCode: contracts.ToolMemoryExhausted, Message: "memory budget exhausted"}
	const want = "regex_matcher: TOOL_STEP_BUDGET: step budget exhausted"
	tests := []struct {
		name         string
		policy       contracts.OnToolFailure
		fallback     string
		err          *contracts.Error // the outcome's error
		failure      *contracts.Error // the run's first failure
		wantFallback bool
		wantErr      bool
		wantReason   string
	}{
		{"fail", contracts.OnToolFailureFail, "", second, first, false, true, want},
		{"retry succeeded", contracts.OnToolFailureRetryWithoutTool, "", nil, first, false, false, want},
		{"retry failed, no fallback", contracts.OnToolFailureRetryWithoutTool, "", second, first, false, true, want},
		{"retry failed, fallback", contracts.OnToolFailureRetryWithoutTool, "sorry", second, first, true, false, want},
		{"retry succeeded, fallback unused", contracts.OnToolFailureRetryWithoutTool, "sorry", nil, first, false, false, want},
		{"fallback", contracts.OnToolFailureFallback, "sorry", first, first, true, false, want},
		{"fallback, not a tool error", contracts.OnToolFailureFallback, "sorry", &contracts.Error{Code: contracts.CodeInternal}, nil, false, true, ""},
		{"no failure", contracts.OnToolFailureFallback, "sorry", nil, nil, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &contracts.JobRequest{OnToolFailure: tt.policy, FallbackResponse: tt.fallback}
			out := &worker.Outcome{Text: "partial", TokenIDs: []int32{5, 6}, StopReason: contracts.StopMaxTokens, Err: tt.err, Usage: contracts.Usage{OutputTokens: 2}}
			worker.Degrade(out, r, tt.failure)
			if out.Fallback != tt.wantFallback || out.Usage.Fallback != tt.wantFallback || (out.Err != nil) != tt.wantErr {
				t.Fatalf("fallback %v (usage %v), err %v", out.Fallback, out.Usage.Fallback, out.Err)
			}
			if out.ToolFailureReason != tt.wantReason || out.Usage.ToolFailureReason != tt.wantReason {
				t.Errorf("reason %q (usage %q), want %q", out.ToolFailureReason, out.Usage.ToolFailureReason, tt.wantReason)
			}
			if tt.wantFallback && (out.Text != "sorry" || out.TokenIDs != nil || out.StopReason != contracts.StopEndTurn || out.Usage.OutputTokens != 2) {
				t.Errorf("fallback outcome %+v", out)
			}
		})
	}
	// A long reason is cut to the contract's bound, on a rune boundary.
	long := &contracts.Error{Code: contracts.CodeToolExecutionFailed, Tool: "x", Message: strings.Repeat("é", contracts.MaxToolFailureReasonBytes)}
	out := &worker.Outcome{}
	worker.Degrade(out, &contracts.JobRequest{}, long)
	if n := len(out.ToolFailureReason); n > contracts.MaxToolFailureReasonBytes || n < contracts.MaxToolFailureReasonBytes-1 || !json.Valid([]byte(`"`+out.ToolFailureReason+`"`)) {
		t.Errorf("long reason: %d bytes", n)
	}
}
