package contracts

import "time"

// ResultStatus is how a job ended.
type ResultStatus string

// The result statuses.
const (
	// StatusCompleted: the job generated its output.
	StatusCompleted ResultStatus = "completed"
	// StatusFailed: the job ended with an error.
	StatusFailed ResultStatus = "failed"
	// StatusCanceled: the submitter canceled the job.
	StatusCanceled ResultStatus = "canceled"
)

// ResultStatuses returns every result status.
func ResultStatuses() []ResultStatus {
	return []ResultStatus{StatusCompleted, StatusFailed, StatusCanceled}
}

// Valid reports whether s is one of the result statuses.
func (s ResultStatus) Valid() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCanceled
}

// Result is a job's outcome, published on zl.results.<tenant>.<job_id> (stream
// ZL_RESULTS, one message per subject, so the last attempt's result is the
// one kept) for clients that fetch results later rather than follow events.
type Result struct {
	// JobID is the job.
	JobID string `json:"job_id"`
	// Tenant is the job's tenant.
	Tenant string `json:"tenant"`
	// Status is how the job ended.
	Status ResultStatus `json:"status"`
	// Text is the whole output text (completed; what was generated before
	// the end otherwise).
	Text string `json:"text,omitempty"`
	// Reasoning is the model's reasoning before its answer (the text of
	// its <think>…</think> block) when the job asked for thinking, or the
	// model thinks by default; Text is then the answer alone. Absent
	// otherwise.
	Reasoning string `json:"reasoning,omitempty"`
	// Embeddings are an embedding job's vectors, one per input in the
	// order of embedding.input (completed), each the base64 of its
	// little-endian float32 components (see [Vector]). Absent for a
	// generation.
	Embeddings []Vector `json:"embeddings,omitempty"`
	// TokenIDs are the output token ids.
	TokenIDs []int32 `json:"token_ids,omitempty"`
	// StopReason says why generation ended (completed generations; an
	// embedding job has none).
	StopReason StopReason `json:"stop_reason,omitempty"`
	// StopSequence is the stop sequence that ended the text, when
	// StopReason is stop_sequence (completed).
	StopSequence string `json:"stop_sequence,omitempty"`
	// Usage is the job's usage record (absent when the job never ran).
	Usage *Usage `json:"usage,omitempty"`
	// ToolReport sums up what each inline tool did.
	ToolReport []ToolReport `json:"tool_report,omitempty"`
	// Incomplete is set when generation stopped at a budget (stop_reason
	// max_tokens or memory_limit) before the output was whole: an output
	// constraint was not yet satisfied (Text is a prefix of a valid
	// output, not one itself), or the last token ended inside a UTF-8
	// character, whose bytes are left out of Text (Text is always valid
	// UTF-8; TokenIDs keep every token). The job is completed, not a tool
	// failure, and billed for what it generated. Absent when the output
	// is whole. See Event.Incomplete.
	Incomplete bool `json:"incomplete,omitempty"`
	// IncompleteReason says why the output is incomplete, naming the
	// unsatisfied tool (with Incomplete).
	IncompleteReason string `json:"incomplete_reason,omitempty"`
	// Attempts counts the generations the delivery that produced the
	// result ran: 1, plus one per regeneration asked for by retry_on_fail
	// or on_tool_failure retry_without_tool. Every attempt's tokens and
	// time are counted in Usage (usage.output_tokens, billed) and
	// usage.retried_output_tokens says how many were discarded; Text and
	// TokenIDs are the last attempt's. Absent when the job did not run,
	// and in results of workers that did not count it.
	Attempts int `json:"attempts,omitempty"`
	// Error says why the job failed or was canceled.
	Error *Error `json:"error,omitempty"`
	// Metadata is the request's metadata, copied (batch_id, custom_id, …)
	// so that batch output can be matched to its input.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Attempt is the delivery attempt that produced the result, from 1.
	Attempt int `json:"attempt"`
	// Fallback is set when Text is the request's fallback_response, given
	// because a tool failed (on_tool_failure fallback, or retry_without_tool
	// whose attempt without the failed tools failed too). The job is
	// completed (stop_reason end_turn), TokenIDs are empty, and Usage
	// bills what ran before. Absent otherwise.
	Fallback bool `json:"fallback,omitempty"`
	// ToolFailureReason says why a tool failed, whatever rung of
	// on_tool_failure handled it ("regex_matcher: TOOL_STEP_BUDGET: …"):
	// the job's error (fail), the failure that dropped a tool
	// (retry_without_tool), or the one the fallback answered. It is the
	// first failure of the job; Usage carries it too. Absent when no tool
	// failed.
	ToolFailureReason string `json:"tool_failure_reason,omitempty"`
	// FinishedAt is when the job ended (RFC 3339, UTC).
	FinishedAt time.Time `json:"finished_at"`
}

// Validate checks the fields every result needs and that the status has its
// companions: stop_reason (or embeddings) for completed, error for failed
// and canceled.
func (r *Result) Validate() error {
	if err := ValidateJobID(r.JobID); err != nil {
		return err
	}
	if err := ValidateTenant(r.Tenant); err != nil {
		return err
	}
	if r.Attempt < 1 {
		return NewError(CodeInvalidRequest, "result attempt starts at 1, got %d", r.Attempt)
	}
	if r.FinishedAt.IsZero() {
		return NewError(CodeInvalidRequest, "result finished_at is not set")
	}
	switch r.Status {
	case StatusCompleted:
		if r.StopReason == "" && len(r.Embeddings) == 0 {
			return NewError(CodeInvalidRequest, "completed result has no stop_reason")
		}
	case StatusFailed, StatusCanceled:
		if r.Error == nil {
			return NewError(CodeInvalidRequest, "%s result has no error", r.Status)
		}
	default:
		return NewError(CodeInvalidRequest, "result status %q is not one of completed, failed, canceled", r.Status)
	}
	return nil
}
