package contracts

import (
	"math"
	"time"
)

// Usage is a job's usage record: what billing prices and what the final
// event and the result carry. It is published on zl.usage.<tenant> (stream
// ZL_USAGE) with Nats-Msg-Id set to the job id, and billed once per job
// whatever the redeliveries. Millisecond timings are JSON numbers with a
// fraction; every field is always present.
type Usage struct {
	// JobID is the job.
	JobID string `json:"job_id"`
	// Tenant is the job's tenant.
	Tenant string `json:"tenant"`
	// Model is the model that ran.
	Model string `json:"model"`
	// Priority is the job's class.
	Priority Priority `json:"priority"`
	// Bucket is the job's prompt-length class.
	Bucket Bucket `json:"bucket"`
	// Status is how the job ended.
	Status ResultStatus `json:"status"`

	// InputTokens counts the prompt tokens, cached ones included.
	InputTokens int `json:"input_tokens"`
	// OutputTokens counts the generated tokens that were kept.
	OutputTokens int `json:"output_tokens"`
	// CachedInputTokens counts the prompt tokens served from the prefix
	// cache.
	CachedInputTokens int `json:"cached_input_tokens"`

	// QueueMs is the time from submission to admission.
	QueueMs float64 `json:"queue_ms"`
	// TimeToFirstTokenMs is the time from admission to the first output
	// token.
	TimeToFirstTokenMs float64 `json:"time_to_first_token_ms"`
	// TimePerTokenMs is the mean time per output token after the first.
	TimePerTokenMs float64 `json:"time_per_token_ms"`
	// InterTokenMsP50 is the median gap between output tokens.
	InterTokenMsP50 float64 `json:"inter_token_ms_p50"`
	// InterTokenMsP99 is the 99th-percentile gap between output tokens.
	InterTokenMsP99 float64 `json:"inter_token_ms_p99"`
	// TotalMs is the time from admission to the end of the job.
	TotalMs float64 `json:"total_ms"`
	// ToolExecutionTimeMs is the inline tools' own execution time.
	ToolExecutionTimeMs float64 `json:"tool_execution_time_ms"`
	// ToolFailureReason is the job's first tool failure, as in the
	// result, whatever on_tool_failure did with it (failed the job,
	// dropped the tool, answered the fallback). Absent when no tool
	// failed.
	ToolFailureReason string `json:"tool_failure_reason,omitempty"`
	// Fallback is set when the job answered its fallback_response (see
	// Result.Fallback); the tokens and time counted are those that ran
	// before. Absent otherwise.
	Fallback bool `json:"fallback,omitempty"`

	// MemoryAllocatedMB is the job's own measured peak of KV cache plus
	// tool memory, in MiB: the KV blocks it computed itself. Blocks it
	// shared from another job (a common prompt prefix) are in
	// SharedMemoryMB instead, so that summed over jobs each block counts
	// once.
	MemoryAllocatedMB float64 `json:"memory_allocated_mb"`
	// SharedMemoryMB is the measured peak of KV cache the job shared with
	// the job that computed it (prefix-cache blocks), in MiB; that job's
	// MemoryAllocatedMB counts it. Absent when zero, and in records of
	// workers that counted shared blocks in MemoryAllocatedMB.
	SharedMemoryMB float64 `json:"shared_memory_mb,omitempty"`
	// Preemptions counts the times the job was evicted.
	Preemptions int `json:"preemptions"`
	// RecomputedTokens counts the tokens computed again after evictions
	// that dropped the KV cache.
	RecomputedTokens int `json:"recomputed_tokens"`
	// Attempt is the delivery attempt that produced the record, from 1.
	Attempt int `json:"attempt"`
	// TraceID is the job's W3C trace id (32 hex digits), or empty.
	TraceID string `json:"trace_id"`
	// WorkerID names the worker that ran the job.
	WorkerID string `json:"worker_id"`
	// Device names the device the job ran on (e.g. "cpu", "cuda:0 H200").
	Device string `json:"device"`
	// Confidence is the mean probability of the chosen tokens, in [0, 1].
	Confidence float64 `json:"confidence"`
	// BatchID and CustomID are the request's metadata batch_id and
	// custom_id, when it has them, so that a batch can be billed as one.
	BatchID  string `json:"batch_id,omitempty"`
	CustomID string `json:"custom_id,omitempty"`

	// CreatedAt is when the job was submitted (RFC 3339, UTC).
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when the job ended (RFC 3339, UTC).
	FinishedAt time.Time `json:"finished_at"`
}

// MaxToolFailureReasonBytes bounds Usage.ToolFailureReason and
// Result.ToolFailureReason; the worker shortens longer reasons.
const MaxToolFailureReasonBytes = 1024

// MaxUsageBytes is the largest usage record DecodeUsage accepts. A real one
// is well under 2 KiB.
const MaxUsageBytes = 64 << 10

// DecodeUsage decodes and validates an untrusted usage record (a ZL_USAGE
// message body) with the same decoder as job requests. It rejects: more
// than MaxUsageBytes (request_too_large); anything but one well-formed
// UTF-8 JSON object (malformed_json); a field without omitempty that is
// missing or null, and a value of the wrong JSON type (invalid_request,
// with its field); and everything Validate rejects. Fields the contract
// does not define are ignored, so that a newer producer adding an optional
// field is still billed. Every failure is a *ValidationError.
func DecodeUsage(b []byte) (Usage, error) {
	var u Usage
	if err := decodeMessage(b, &u, "usage record", MaxUsageBytes, shapeRules{required: true}); err != nil {
		return Usage{}, err
	}
	if err := u.Validate(); err != nil {
		return Usage{}, err
	}
	return u, nil
}

// Validate checks the values of a usage record and returns nil or a
// *ValidationError listing every problem with its field: the job id and
// tenant are valid subject tokens; model is set; priority, bucket and
// status are the contract's; counts and timings are not negative and
// timings are finite; confidence is in [0, 1]; attempt is at least 1;
// created_at and finished_at are set; model is at most MaxModelNameLen
// bytes, batch_id and custom_id at most MaxMetadataValueLen (the bound of
// the request metadata they come from).
func (u *Usage) Validate() error {
	var ps problems
	add := func(field, format string, a ...any) { ps.add(CodeInvalidRequest, field, format, a...) }
	if err := ValidateJobID(u.JobID); err != nil {
		add("job_id", "%v", err)
	}
	if err := ValidateTenant(u.Tenant); err != nil {
		add("tenant", "%v", err)
	}
	if u.Model == "" || len(u.Model) > MaxModelNameLen {
		add("model", "model must be 1–%d bytes", MaxModelNameLen)
	}
	if !u.Priority.Valid() {
		add("priority", "priority %q is not high, normal or low", u.Priority)
	}
	if !u.Bucket.Valid() {
		add("bucket", "bucket %q is not short, medium or long", u.Bucket)
	}
	switch u.Status {
	case StatusCompleted, StatusFailed, StatusCanceled:
	default:
		add("status", "status %q is not completed, failed or canceled", u.Status)
	}
	for _, c := range []struct {
		name string
		v    int
	}{
		{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens},
		{"cached_input_tokens", u.CachedInputTokens}, {"preemptions", u.Preemptions},
		{"recomputed_tokens", u.RecomputedTokens},
	} {
		if c.v < 0 {
			add(c.name, "%s is negative (%d)", c.name, c.v)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"queue_ms", u.QueueMs}, {"time_to_first_token_ms", u.TimeToFirstTokenMs},
		{"time_per_token_ms", u.TimePerTokenMs}, {"inter_token_ms_p50", u.InterTokenMsP50},
		{"inter_token_ms_p99", u.InterTokenMsP99}, {"total_ms", u.TotalMs},
		{"tool_execution_time_ms", u.ToolExecutionTimeMs}, {"memory_allocated_mb", u.MemoryAllocatedMB},
		{"shared_memory_mb", u.SharedMemoryMB},
		{"confidence", u.Confidence},
	} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 {
			add(c.name, "%s must be a finite number ≥ 0, not %v", c.name, c.v)
		}
	}
	if u.Confidence > 1 {
		add("confidence", "confidence %v is above 1", u.Confidence)
	}
	if u.Attempt < 1 {
		add("attempt", "attempt %d is below 1", u.Attempt)
	}
	if len(u.ToolFailureReason) > MaxToolFailureReasonBytes {
		add("tool_failure_reason", "tool_failure_reason is %d bytes, above the limit of %d", len(u.ToolFailureReason), MaxToolFailureReasonBytes)
	}
	if u.CreatedAt.IsZero() {
		add("created_at", "created_at is not set")
	}
	if u.FinishedAt.IsZero() {
		add("finished_at", "finished_at is not set")
	}
	// batch_id and custom_id are request metadata values, bounded as
	// those are: a record must not be refused for what its request was
	// allowed to carry.
	if len(u.BatchID) > MaxMetadataValueLen {
		add("batch_id", "batch_id must be at most %d bytes", MaxMetadataValueLen)
	}
	if len(u.CustomID) > MaxMetadataValueLen {
		add("custom_id", "custom_id must be at most %d bytes", MaxMetadataValueLen)
	}
	return ps.err()
}
