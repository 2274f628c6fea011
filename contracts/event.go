package contracts

import (
	"fmt"
	"time"
)

// EventType says what an Event reports.
type EventType string

// The event types, in the order a job emits them. A job's events are
// started, then deltas and tool events (with preempted/resumed pairs
// anywhere between), then exactly one of final or error.
const (
	// EventStarted: a worker admitted the job (once per attempt).
	EventStarted EventType = "started"
	// EventDelta: new output text and its token ids.
	EventDelta EventType = "delta"
	// EventTool: an inline tool acted (redaction, retry, masking, …).
	EventTool EventType = "tool"
	// EventPreempted: the job was evicted to free memory; it resumes later.
	EventPreempted EventType = "preempted"
	// EventResumed: a preempted job runs again.
	EventResumed EventType = "resumed"
	// EventFinal: the job completed; carries usage, and stop_reason
	// (but for an embedding job, which generates nothing).
	EventFinal EventType = "final"
	// EventError: the job failed; carries error.
	EventError EventType = "error"
)

// EventTypes returns every event type.
func EventTypes() []EventType {
	return []EventType{EventStarted, EventDelta, EventTool, EventPreempted, EventResumed, EventFinal, EventError}
}

// Valid reports whether t is one of the event types.
func (t EventType) Valid() bool {
	_, ok := eventRequired[t]
	return ok
}

// Terminal reports whether t ends the job's stream (final or error).
func (t EventType) Terminal() bool { return t == EventFinal || t == EventError }

// eventRequired lists, per type, the JSON fields an event of that type must
// carry beyond the common ones. Event.Validate and the JSON Schema
// (schema/event.json) both follow it.
var eventRequired = map[EventType][]string{
	EventStarted:   nil,
	EventDelta:     nil, // text or token_ids: checked by Validate
	EventTool:      {"tool", "action"},
	EventPreempted: nil,
	EventResumed:   nil,
	EventFinal:     {"stop_reason", "usage"},
	EventError:     {"error"},
}

// Event is one message on zl.events.<tenant>.<job_id> (stream ZL_EVENTS). Late
// subscribers replay a job's events from the start. A redelivered job runs
// again from scratch with attempt+1 and seq back at 1: a client that sees a
// higher attempt discards what it built from the lower one.
//
// Which fields are set depends on Type; the rest are omitted from the JSON.
type Event struct {
	// Type says what the event reports.
	Type EventType `json:"type"`
	// JobID is the job the event is about.
	JobID string `json:"job_id"`
	// Tenant is the job's tenant.
	Tenant string `json:"tenant"`
	// Seq numbers the events of one attempt from 1, without gaps.
	Seq uint64 `json:"seq"`
	// Attempt is the JetStream delivery count of the job, from 1.
	Attempt int `json:"attempt"`
	// Time is when the worker emitted the event (RFC 3339, UTC).
	Time time.Time `json:"time"`

	// Text is the new output text (delta), or the whole output text
	// (final, optional). For a job whose model thinks (see
	// JobRequest.Thinking) it is the answer's text only.
	Text string `json:"text,omitempty"`
	// Reasoning is the new reasoning text (delta), or the whole reasoning
	// (final, optional), of a job whose model thinks: the text of its
	// <think>…</think> block, apart from the answer. The tokens behind it
	// are in TokenIDs with the answer's.
	Reasoning string `json:"reasoning,omitempty"`
	// TokenIDs are the ids of the tokens behind Text (delta).
	TokenIDs []int32 `json:"token_ids,omitempty"`
	// Logprobs has one entry per token in TokenIDs when the request asked
	// for logprobs (delta).
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`

	// Tool names the inline tool that acted (tool).
	Tool string `json:"tool,omitempty"`
	// Action says what the tool did (tool).
	Action ToolAction `json:"action,omitempty"`
	// Detail explains the tool action, or why the job was preempted or how
	// it resumed (tool, preempted, resumed).
	Detail string `json:"detail,omitempty"`

	// StopReason says why generation ended (final).
	StopReason StopReason `json:"stop_reason,omitempty"`
	// StopSequence is the stop sequence that ended the text, when
	// StopReason is stop_sequence (final).
	StopSequence string `json:"stop_sequence,omitempty"`
	// Usage is the job's usage record, also published on zl.usage.<tenant>
	// (final).
	Usage *Usage `json:"usage,omitempty"`
	// ToolReport sums up what each inline tool did (final).
	ToolReport []ToolReport `json:"tool_report,omitempty"`
	// Incomplete is set (final) when generation stopped at a budget
	// (stop_reason max_tokens or memory_limit) before the output was
	// whole: an output constraint (response_format, json_validator,
	// regex_matcher, xml_validator) was not yet satisfied, so Text is a
	// prefix of a valid output and not one itself, or the last token
	// ended inside a UTF-8 character, whose bytes are then left out of
	// Text (Text is always valid UTF-8; token_ids keep every token).
	// Such a job completes, is billed for what it generated, and is not
	// a tool failure. Absent when the output is whole.
	Incomplete bool `json:"incomplete,omitempty"`
	// IncompleteReason says why the output is incomplete, naming the
	// unsatisfied tool (final, with Incomplete).
	IncompleteReason string `json:"incomplete_reason,omitempty"`
	// Attempts counts the generations this delivery ran for the job
	// (final): 1, plus one for each regeneration that retry_on_fail or
	// on_tool_failure retry_without_tool asked for. Every attempt's
	// tokens and time are in Usage and billed; the text is the last
	// attempt's. Absent in events of workers that did not count it.
	Attempts int `json:"attempts,omitempty"`

	// Error says why the job failed (error).
	Error *Error `json:"error,omitempty"`
}

// Validate checks the common fields and that the fields the type needs are
// set. Workers call it before publishing; clients may call it on receipt.
func (e *Event) Validate() error {
	if !e.Type.Valid() {
		return NewError(CodeInvalidRequest, "event type %q is not one of the event types", e.Type)
	}
	if err := ValidateJobID(e.JobID); err != nil {
		return err
	}
	if err := ValidateTenant(e.Tenant); err != nil {
		return err
	}
	if e.Seq < 1 || e.Attempt < 1 {
		return NewError(CodeInvalidRequest, "event seq and attempt start at 1, got seq %d, attempt %d", e.Seq, e.Attempt)
	}
	if e.Time.IsZero() {
		return NewError(CodeInvalidRequest, "event time is not set")
	}
	missing := func(field string) error {
		return NewError(CodeInvalidRequest, "%s event has no %s", e.Type, field)
	}
	switch e.Type {
	case EventDelta:
		if e.Text == "" && len(e.TokenIDs) == 0 {
			return missing("text or token_ids")
		}
		if len(e.Logprobs) > 0 && len(e.Logprobs) != len(e.TokenIDs) {
			return NewError(CodeInvalidRequest, "delta event has %d logprobs for %d tokens", len(e.Logprobs), len(e.TokenIDs))
		}
	case EventTool:
		if e.Tool == "" {
			return missing("tool")
		}
		if e.Action == "" {
			return missing("action")
		}
	case EventFinal:
		if e.StopReason == "" && (e.Usage == nil || e.Usage.Kind != KindEmbedding) {
			// An embedding job generates nothing, so nothing stopped.
			return missing("stop_reason")
		}
		if e.Usage == nil {
			return missing("usage")
		}
	case EventError:
		if e.Error == nil {
			return missing("error")
		}
	}
	return nil
}

// String returns a short description for logs.
func (e *Event) String() string {
	return fmt.Sprintf("%s job=%s attempt=%d seq=%d", e.Type, e.JobID, e.Attempt, e.Seq)
}

// TokenLogprob is the log-probability of one generated token.
type TokenLogprob struct {
	// TokenID is the generated token.
	TokenID int32 `json:"token_id"`
	// Token is the token's text, when it decodes on its own.
	Token string `json:"token,omitempty"`
	// Bytes are the bytes the token stands for in the vocabulary (a
	// byte-fallback token's single byte; no space prefix taken off).
	Bytes []byte `json:"bytes,omitempty"`
	// Logprob is the natural log of the token's probability under the
	// model (before temperature and truncation).
	Logprob float64 `json:"logprob"`
	// TopLogprobs are the most likely alternatives, most likely first,
	// when the request asked for top_logprobs. Tokens that could not be
	// chosen (masked by an output constraint or a banned-word filter:
	// probability 0, log-probability -Inf) are left out, so a step may
	// list fewer than top_logprobs alternatives; a logprob is always a
	// finite number.
	TopLogprobs []TopLogprob `json:"top_logprobs,omitempty"`
}

// TopLogprob is one alternative token and its log-probability.
type TopLogprob struct {
	// TokenID is the alternative token.
	TokenID int32 `json:"token_id"`
	// Token is the token's text, when it decodes on its own.
	Token string `json:"token,omitempty"`
	// Bytes are the bytes the token stands for in the vocabulary.
	Bytes []byte `json:"bytes,omitempty"`
	// Logprob is the natural log of the token's probability.
	Logprob float64 `json:"logprob"`
}

// ToolAction says what an inline tool did in a tool event.
type ToolAction string

// The tool actions. Tools may report others; readers should show unknown
// actions as they are.
const (
	// ToolActionRedacted: text was replaced (pii_redactor).
	ToolActionRedacted ToolAction = "redacted"
	// ToolActionMasked: tokens were forbidden at the logits
	// (toxicity_filter, constraints).
	ToolActionMasked ToolAction = "masked"
	// ToolActionRetried: the output was discarded and generated again
	// (retry_on_fail, or on_tool_failure retry_without_tool).
	ToolActionRetried ToolAction = "retried"
	// ToolActionAppended: text was appended (suffix).
	ToolActionAppended ToolAction = "appended"
	// ToolActionViolated: a soft-mode constraint was not met.
	ToolActionViolated ToolAction = "violated"
	// ToolActionFailed: the tool failed; the job fails or retries without
	// it, per on_tool_failure.
	ToolActionFailed ToolAction = "failed"
)

// StopReason says why generation ended.
type StopReason string

// The stop reasons.
const (
	// StopEndTurn: the model produced its end-of-sequence token.
	StopEndTurn StopReason = "end_turn"
	// StopMaxTokens: max_tokens tokens were generated.
	StopMaxTokens StopReason = "max_tokens"
	// StopSequence: a stop sequence matched.
	StopSequence StopReason = "stop_sequence"
	// StopMemoryLimit: the job reached its max_memory_mb cap.
	StopMemoryLimit StopReason = "memory_limit"
	// StopConstraint: a response_format or tool constraint completed (the
	// grammar or pattern admits no longer output).
	StopConstraint StopReason = "constraint"
	// StopCanceled: the submitter canceled the job, or its deadline
	// passed, while it ran; the output is what was generated before.
	StopCanceled StopReason = "canceled"
)

// StopReasons returns every stop reason.
func StopReasons() []StopReason {
	return []StopReason{StopEndTurn, StopMaxTokens, StopSequence, StopMemoryLimit, StopConstraint, StopCanceled}
}

// ToolReport sums up one inline tool's work on a job.
type ToolReport struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Status is how the tool fared.
	Status ToolStatus `json:"status"`
	// Actions counts the tool's actions (redactions, retries, masks, …).
	Actions int `json:"actions"`
	// TimeMs is the tool's own execution time, in milliseconds.
	TimeMs float64 `json:"time_ms"`
	// Detail explains the status, e.g. a soft violation.
	Detail string `json:"detail,omitempty"`
}

// ToolStatus is how an inline tool fared on a job.
type ToolStatus string

// The tool statuses.
const (
	// ToolStatusOK: the tool ran and its constraint holds (on an
	// incomplete output, for what was generated before the budget ran
	// out: Detail then says "incomplete").
	ToolStatusOK ToolStatus = "ok"
	// ToolStatusViolated: a soft-mode constraint does not hold.
	ToolStatusViolated ToolStatus = "violated"
	// ToolStatusFailed: the tool failed.
	ToolStatusFailed ToolStatus = "failed"
	// ToolStatusDropped: the tool failed and was dropped
	// (on_tool_failure retry_without_tool).
	ToolStatusDropped ToolStatus = "dropped"
)
