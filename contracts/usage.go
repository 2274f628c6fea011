package contracts

import "time"

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

	// MemoryAllocatedMB is the job's own measured peak of KV cache plus
	// tool memory, in MiB.
	MemoryAllocatedMB float64 `json:"memory_allocated_mb"`
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
