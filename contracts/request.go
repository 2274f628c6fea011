package contracts

import (
	"encoding/json"
	"strings"
	"time"
)

// JobRequest is one job: a generation, Messages-API shaped, or with
// Embedding set an embedding job (see [EmbeddingRequest]). It is the body of a
// message on zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>. The tenant is not part of
// the body: it comes from the submitter's credentials and travels in the
// subject and the Zl-Tenant header.
//
// Pointer fields distinguish "unset" (nil, the preset's or the model's
// default applies) from an explicit zero. Decode untrusted bytes with
// [DecodeJobRequest], which checks the size, the JSON, unknown fields and
// every rule of [JobRequest.Validate].
type JobRequest struct {
	// ID is the job id and idempotency key: a resubmission with the same id
	// inside the ZL_JOBS duplicate window is dropped by JetStream. Optional
	// from clients (the producer assigns one); 1–128 characters of
	// [A-Za-z0-9_-], as it is a subject token.
	ID string `json:"id,omitempty"`
	// Model names the model to run.
	Model string `json:"model"`
	// System is the system prompt. It may contain inline tool blocks
	// (<tool name="…"><param name="…">…</param></tool>), which the worker
	// parses and removes before tokenization.
	System string `json:"system,omitempty"`
	// Messages is the conversation, oldest first; at least one, except in
	// an embedding job, which has none.
	Messages []Message `json:"messages,omitempty"`
	// MaxTokens caps the generated tokens. 0 means unset: the limits'
	// default applies (see [Limits.DefaultMaxTokens]).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature scales the logits; 0 is greedy. In [0, 2].
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP is the nucleus-sampling mass. In (0, 1].
	TopP *float64 `json:"top_p,omitempty"`
	// TopK keeps the k most likely tokens; 0 disables it. At least 0.
	TopK *int `json:"top_k,omitempty"`
	// MinP drops tokens below min_p times the best token's probability.
	// In [0, 1).
	MinP *float64 `json:"min_p,omitempty"`
	// RepetitionPenalty penalises recently seen tokens; 1 disables it.
	// Above 0.
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// Seed seeds the sampler; the same seed and parameters give the same
	// output on the same model.
	Seed *uint64 `json:"seed,omitempty"`
	// StopSequences end the generation when the output contains one; the
	// sequence itself is not returned.
	StopSequences []string `json:"stop_sequences,omitempty"`
	// Logprobs asks for the log-probability of each generated token in
	// delta events.
	Logprobs bool `json:"logprobs,omitempty"`
	// TopLogprobs asks for that many most likely alternatives per token;
	// needs logprobs.
	TopLogprobs int `json:"top_logprobs,omitempty"`
	// Preset names a sampling preset; explicit sampling fields override it.
	Preset Preset `json:"preset,omitempty"`
	// Priority is the job's class; empty means normal.
	Priority Priority `json:"priority,omitempty"`
	// Speculation is "off" to decode without drafts, or empty (or
	// "auto") for the worker's default: a worker may draft tokens the
	// constraints force or the context repeats and verify them in one
	// forward pass. It changes how many passes the job takes, never its
	// output.
	Speculation Speculation `json:"speculation,omitempty"`
	// Deadline is when the job stops being useful (RFC 3339); a job still
	// queued or running then fails with deadline_exceeded.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Stream asks for delta events on zl.events.<tenant>.<job_id> as tokens are
	// generated. Without it a worker may coalesce or skip deltas; started,
	// final and error events are published either way.
	Stream bool `json:"stream,omitempty"`
	// Thinking switches a reasoning model's thinking (Qwen3's
	// enable_thinking) on or off; nil leaves the model's default. With
	// thinking on, the reasoning the model writes before its answer (its
	// <think>…</think> block) is returned apart, in the result's reasoning
	// field, and the result's text is the answer alone. For a model whose
	// template has no thinking switch it is an error to ask for it on.
	Thinking *Thinking `json:"thinking,omitempty"`
	// ResponseFormat constrains the whole output to a JSON Schema or a
	// regular expression.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Tools are inline tools run inside the decode loop, in order.
	Tools []Tool `json:"tools,omitempty"`
	// OnToolFailure says what a tool failure does; empty means fail. The
	// rungs of the degradation ladder, from the strictest: fail,
	// retry_without_tool, fallback. Whatever the rung, the result and the
	// usage record say why in tool_failure_reason.
	OnToolFailure OnToolFailure `json:"on_tool_failure,omitempty"`
	// FallbackResponse is the answer of a job whose tool failed, with
	// on_tool_failure fallback (required there), or with
	// retry_without_tool when the attempt without the failed tools fails
	// too. The result is then completed with this text, fallback: true
	// and the failure in tool_failure_reason; what ran before is billed.
	// At most MaxFallbackResponseBytes bytes.
	FallbackResponse string `json:"fallback_response,omitempty"`
	// Memory holds the job's memory and latency requirements.
	Memory *MemoryOptions `json:"memory,omitempty"`
	// Metadata is a free map of strings (batch_id, custom_id, …), copied
	// into the job's Result.
	Metadata map[string]string `json:"metadata,omitempty"`
	// WaitForModel queues the job even when no live worker serves its
	// model, until one that does starts (or the job's TTL passes). Without
	// it a submit is refused with unknown_model when workers are live and
	// none serves the model nor served it lately; with no worker live at
	// all the job is queued either way. Workers ignore it.
	WaitForModel bool `json:"wait_for_model,omitempty"`
	// Embedding makes the job an embedding job: its inputs are embedded,
	// nothing is generated. Absent for a generation.
	Embedding *EmbeddingRequest `json:"embedding,omitempty"`
}

// Message is one turn of the conversation.
type Message struct {
	// Role is user or assistant. A final assistant message is a prefill
	// the generation continues from.
	Role Role `json:"role"`
	// Content is the turn's text.
	Content string `json:"content"`
}

// Role is the author of a message.
type Role string

// The roles. The system prompt is JobRequest.System, not a message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Preset names a sampling preset. The values behind each name belong to the
// worker's sampler; the contract fixes only the names.
type Preset string

// The presets, from the most to the least restrained.
const (
	PresetConcise  Preset = "concise"
	PresetBalanced Preset = "balanced"
	PresetDetailed Preset = "detailed"
	PresetCreative Preset = "creative"
)

// Presets returns every preset name, most restrained first.
func Presets() []Preset {
	return []Preset{PresetConcise, PresetBalanced, PresetDetailed, PresetCreative}
}

// Valid reports whether p is one of the presets.
func (p Preset) Valid() bool {
	for _, q := range Presets() {
		if p == q {
			return true
		}
	}
	return false
}

// ResponseFormat constrains the output as a whole.
type ResponseFormat struct {
	// Type is json_schema or regex.
	Type ResponseFormatType `json:"type"`
	// Schema is the JSON Schema (draft 2020-12) the output must match; with
	// type json_schema.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Pattern is the RE2 regular expression the whole output must match;
	// with type regex.
	Pattern string `json:"pattern,omitempty"`
	// Trigger, with type json_schema, makes the constraint optional: the
	// output is either text that does not start with Trigger (free), or
	// Trigger followed by a document valid for Schema and nothing after
	// it. 1–MaxTriggerBytes bytes. The gateways use it for tool calls the
	// model may or may not make.
	Trigger string `json:"trigger,omitempty"`
	// Whitespace, with type json_schema, says how the document is laid
	// out: compact (the default: no whitespace between tokens, none
	// wasted) or pretty (runs of up to 64 whitespace bytes between
	// tokens, enough for a newline and indentation).
	Whitespace Whitespace `json:"whitespace,omitempty"`
	// MaxStringLength, with type json_schema, caps (in code points) the
	// strings and additional property names the schema leaves unbounded
	// (no maxLength, pattern or format; a minLength above the cap wins;
	// named properties are never cut). 0, the default, leaves them
	// uncapped (max_tokens bounds the output as a whole); at most
	// MaxStringLengthLimit.
	MaxStringLength int `json:"max_string_length,omitempty"`
}

// MaxTriggerBytes bounds ResponseFormat.Trigger.
const MaxTriggerBytes = 32

// MaxStringLengthLimit bounds ResponseFormat.MaxStringLength and the
// json_validator param max_string_length.
const MaxStringLengthLimit = 1 << 20

// Whitespace says how a JSON document is laid out between its tokens
// (ResponseFormat.Whitespace, the json_validator param whitespace).
type Whitespace string

// The whitespace layouts.
const (
	// WhitespaceCompact allows no whitespace between JSON tokens (the
	// default).
	WhitespaceCompact Whitespace = "compact"
	// WhitespacePretty allows runs of up to 64 whitespace bytes between
	// JSON tokens.
	WhitespacePretty Whitespace = "pretty"
)

// Valid reports whether w is empty (the default) or a known layout.
func (w Whitespace) Valid() bool {
	return w == "" || w == WhitespaceCompact || w == WhitespacePretty
}

// ResponseFormatType says how a ResponseFormat constrains the output.
type ResponseFormatType string

// The response format types.
const (
	FormatJSONSchema ResponseFormatType = "json_schema"
	FormatRegex      ResponseFormatType = "regex"
)

// Tool is one inline tool. Name picks the tool; Params are its parameters,
// checked against the tool's table in tools.go (see [ToolNames]).
type Tool struct {
	// Name is the tool, e.g. json_validator.
	Name ToolName `json:"name"`
	// Params are the tool's parameters, kept as raw JSON.
	Params map[string]json.RawMessage `json:"params,omitempty"`
	// Mode is strict (the default: a violation is an error) or soft (a
	// violation is reported in the tool report and generation goes on).
	Mode ToolMode `json:"mode,omitempty"`
	// ContextID names the memory pool the tool runs in: the job's tools
	// with the same context_id share one memory and step budget, tools
	// with different ids are budgeted apart (each pool with its own
	// compiled copy of its automata and mask caches), so one exhausting
	// its pool does not starve the others. Empty is the job's default
	// pool: one step budget, memory capped per tool. 1–64 characters of
	// [A-Za-z0-9_.-].
	ContextID string `json:"context_id,omitempty"`
}

// MaxContextIDLen is the longest Tool.ContextID.
const MaxContextIDLen = 64

// ToolMode says whether a tool's constraint is binding.
type ToolMode string

// The tool modes.
const (
	ToolModeStrict ToolMode = "strict"
	ToolModeSoft   ToolMode = "soft"
)

// OnToolFailure says what happens to a job whose tool fails.
type OnToolFailure string

// The tool failure policies.
const (
	// OnToolFailureFail ends the job with tool_execution_failed (the
	// default).
	OnToolFailureFail OnToolFailure = "fail"
	// OnToolFailureRetryWithoutTool drops the failed tool and regenerates
	// within the job's budget; when the job has a fallback_response and
	// the new attempt fails too, the fallback answers.
	OnToolFailureRetryWithoutTool OnToolFailure = "retry_without_tool"
	// OnToolFailureFallback answers the job's fallback_response at once
	// (the result is completed and marked fallback).
	OnToolFailureFallback OnToolFailure = "fallback"
)

// MaxFallbackResponseBytes bounds JobRequest.FallbackResponse.
const MaxFallbackResponseBytes = 16 << 10

// MemoryOptions are the job's memory and latency requirements.
type MemoryOptions struct {
	// MaxMemoryMB caps the job's own KV cache plus tool memory, in MiB. A
	// prompt that cannot fit is rejected with memory_limit; a generation
	// that reaches the cap stops with stop_reason memory_limit. 0 means no
	// cap of the job's own.
	MaxMemoryMB int `json:"max_memory_mb,omitempty"`
	// Preemptible lets the scheduler evict the job under memory pressure.
	// Unset means true, except for low_latency jobs.
	Preemptible *bool `json:"preemptible,omitempty"`
	// LowLatency admits the job only with its worst case reserved, so it is
	// never preempted.
	LowLatency bool `json:"low_latency,omitempty"`
}

// EffectivePriority returns r.Priority, or DefaultPriority when it is empty.
func (r *JobRequest) EffectivePriority() Priority {
	if r.Priority == "" {
		return DefaultPriority
	}
	return r.Priority
}

// Preemptible reports whether the scheduler may evict the job: the explicit
// memory.preemptible when set, otherwise true unless memory.low_latency.
func (r *JobRequest) Preemptible() bool {
	if r.Memory == nil {
		return true
	}
	if r.Memory.Preemptible != nil {
		return *r.Memory.Preemptible
	}
	return !r.Memory.LowLatency
}

// ApplyDefaults fills the unset fields that have a contract default:
// priority (normal), max_tokens (lim.DefaultMaxTokens), on_tool_failure
// (fail, when there are tools), and memory.low_latency when the system
// prompt has a <tool name="low_latency_mode"> block. It leaves sampling
// fields alone: their defaults depend on the preset and belong to the
// worker.
func (r *JobRequest) ApplyDefaults(lim Limits) {
	lim = lim.WithDefaults()
	if r.System != "" && strings.Contains(r.System, DirectiveLowLatencyMode) {
		if sp, err := ParseSystemPrompt(r.System); err == nil && sp.LowLatency {
			if r.Memory == nil {
				r.Memory = &MemoryOptions{}
			}
			r.Memory.LowLatency = true
		}
	}
	if r.Priority == "" {
		r.Priority = DefaultPriority
	}
	if r.MaxTokens == 0 && !r.IsEmbedding() {
		r.MaxTokens = lim.DefaultMaxTokens
	}
	if r.OnToolFailure == "" && len(r.Tools) > 0 {
		r.OnToolFailure = OnToolFailureFail
	}
}

// Thinking is a job's thinking switch (JobRequest.Thinking).
type Thinking struct {
	// Type is ThinkingEnabled or ThinkingDisabled.
	Type string `json:"type"`
}

// The thinking switch's values.
const (
	ThinkingEnabled  = "enabled"
	ThinkingDisabled = "disabled"
)

// Enabled reports whether t asks for thinking on: nil when the model's
// default applies.
func (t *Thinking) Enabled() *bool {
	if t == nil {
		return nil
	}
	on := t.Type == ThinkingEnabled
	return &on
}

// Speculation is a job's drafting mode (JobRequest.Speculation).
type Speculation string

const (
	SpeculationAuto Speculation = "auto"
	SpeculationOff  Speculation = "off"
)

// Valid reports whether s is a known mode; empty is (the worker's
// default).
func (s Speculation) Valid() bool {
	return s == "" || s == SpeculationAuto || s == SpeculationOff
}
