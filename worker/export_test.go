package worker

import "github.com/zerolayer/zerolayer/contracts"

// Observe is Metrics.observe, for the tests of package worker_test.
func Observe(m *Metrics, status contracts.ResultStatus, e *contracts.Error, u *contracts.Usage, tools []contracts.ToolReport) {
	m.observe(status, e, u, tools)
}

// Degrade is the worker's on_tool_failure ladder on an outcome
// (applyToolFailure), for the tests of package worker_test.
func Degrade(out *Outcome, r *contracts.JobRequest, failure *contracts.Error) {
	degrade(out, r, failure)
}

// Running counts the jobs w is handling (from their look-up to their end).
func Running(w *Worker) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}
