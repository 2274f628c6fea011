package worker

import (
	"context"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// Job is a decoded, validated job handed to an Executor.
type Job struct {
	ID       string
	Tenant   string
	Priority contracts.Priority
	Bucket   contracts.Bucket
	Attempt  int
	Request  *contracts.JobRequest
	// Trace is the job's W3C trace context (zero when the producer sent
	// none).
	Trace contracts.Traceparent
	// MaxResultBytes is the most bytes the job's result may take (the
	// NATS server's maximum payload); 0: no limit. An embedding job whose
	// vectors could not fit is refused before it runs.
	MaxResultBytes int
	// EnqueuedAt is when JetStream stored the job.
	EnqueuedAt time.Time
	// Weight is the tenant's share of its class against other tenants'
	// (Config.TenantWeights); zero means 1.
	Weight float64
}

// Sink receives a running job's output as it is produced. Calls come from
// the executor's goroutine, in order.
type Sink interface {
	// Delta reports new output: the text that became complete, the token
	// ids behind it, and their logprobs when the request asked for them.
	Delta(text string, ids []int32, logprobs []contracts.TokenLogprob)
	// Event reports a scheduling event: kind "preempted" or "resumed".
	Event(kind, detail string)
	// Tool reports an inline tool's action.
	Tool(tool string, action contracts.ToolAction, detail string)
}

// ReasoningSink is implemented by sinks that take a thinking job's
// reasoning apart from its answer (the worker's own sink does): the
// executors pass the text of the model's <think>…</think> block to
// Reasoning, and only the answer's text to Delta (whose ids are all the
// tokens). A sink without it gets the answer alone.
type ReasoningSink interface {
	Reasoning(text string)
}

// Admitter is implemented by executors that admit jobs by memory: the
// intake pulls a tenant's jobs of a (priority, bucket) class for a model
// only as many as Admits says that model would admit, so jobs stay in
// JetStream for workers with room. The model is empty for jobs of the
// model-less subject forms (any served model may be asked for), the tenant
// for jobs of the oldest form, pulled without regard to tenant.
type Admitter interface {
	// Admits is how many jobs of the class and tenant for model the
	// executor would take now (0: none); with model empty, the most any
	// of its models would.
	Admits(model string, p contracts.Priority, b contracts.Bucket, tenant string) int
	// OnCapacity registers f, called (without blocking) whenever the
	// executor may admit more than when Admits last said none.
	OnCapacity(f func())
}

// Outcome is what an executor reports for a job that ran: the output and
// the usage fields the executor measures (token counts, timings, memory,
// preemptions, confidence). The worker fills in identity, queue time and
// status.
type Outcome struct {
	Text string
	// Reasoning is a thinking job's reasoning, apart from Text (the
	// answer); empty otherwise.
	Reasoning  string
	TokenIDs   []int32
	StopReason contracts.StopReason
	// StopSequence is the stop sequence that ended the text.
	StopSequence string
	// Canceled is set when the job stopped because its context was
	// canceled (by the submitter, or a passed deadline); the output is
	// what ran before.
	Canceled bool
	// Fallback is set when Text is the request's fallback_response,
	// answered because a tool failed (contracts.Result.Fallback).
	Fallback bool
	// ToolFailureReason is the job's first tool failure, whatever
	// on_tool_failure did with it (contracts.Result.ToolFailureReason).
	ToolFailureReason string
	// Err is set when the job ran but failed (an inline tool failed): it
	// is billed for what ran and answered with this error.
	Err *contracts.Error
	// ToolReport sums up the inline tools' work.
	ToolReport []contracts.ToolReport
	// Incomplete and IncompleteReason: generation stopped at a budget
	// before the output was whole (contracts.Result.Incomplete).
	Incomplete       bool
	IncompleteReason string
	// Attempts counts the generations run for the job (1 + the tools'
	// retries); 0 means 1. Usage counts every attempt's tokens.
	Attempts int
	// Embeddings are an embedding job's vectors, one per input.
	Embeddings [][]float32
	Usage      contracts.Usage
}

// Executor runs jobs on a model. The worker calls Execute from several
// goroutines at once, up to its concurrency; an executor admits what it can
// and queues the rest (the in-order executor runs one job at a time, the
// scheduler batches them).
//
// Execute returns an error only when the job produced no usable outcome:
// a *contracts.Error for a bad job (unknown model, prompt too long, …), or
// another error, retried when it reports Retryable. When ctx is canceled
// mid-job, Execute returns the partial Outcome with Canceled set.
type Executor interface {
	Execute(ctx context.Context, job *Job, sink Sink) (*Outcome, error)
	// Device names where jobs run, for usage records ("cpu", "cuda:0 …").
	Device() string
}
