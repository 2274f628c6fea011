package contracts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Code is a stable, machine-readable error code carried on the wire (in
// error events, results, DLQ records and HTTP error bodies). Codes are never
// renamed or reused; new ones may be added in a later contract version, so a
// reader must tolerate codes it does not know (see [Code.Known]).
//
// Code implements error so that a code can be matched directly:
// errors.Is(err, contracts.CodeUnknownTool) is true for an [*Error] or a
// [*ValidationError] carrying that code.
type Code string

// The error codes, documented one per line in errors.md (generated from
// [Codes]; TestErrorsDoc keeps the two in step).
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeMalformedJSON       Code = "malformed_json"
	CodeMissingMessages     Code = "missing_messages"
	CodeUnknownModel        Code = "unknown_model"
	CodePromptTooLong       Code = "prompt_too_long"
	CodeMaxTokensOutOfRange Code = "max_tokens_out_of_range"
	CodeInvalidSampling     Code = "invalid_sampling"
	CodeUnknownPreset       Code = "unknown_preset"
	CodeUnknownTool         Code = "unknown_tool"
	CodeInvalidSchema       Code = "invalid_schema"
	CodeInvalidRegex        Code = "invalid_regex"
	CodeRequestTooLarge     Code = "request_too_large"
	CodeUnsupportedContract Code = "unsupported_contract"
	CodeUnauthenticated     Code = "unauthenticated"
	CodeMemoryLimit         Code = "memory_limit"
	CodeToolExecutionFailed Code = "tool_execution_failed"
	CodeDeadlineExceeded    Code = "deadline_exceeded"
	CodeCanceled            Code = "canceled"
	CodeNotFound            Code = "not_found"
	CodeUnavailable         Code = "unavailable"
	CodeWorkerShutdown      Code = "worker_shutdown"
	CodeInternal            Code = "internal"
	CodeRateLimited         Code = "rate_limited"
	CodeConcurrencyLimited  Code = "concurrency_limited"
	CodeSpendLimitExceeded  Code = "spend_limit_exceeded"
	CodeOverloaded          Code = "overloaded"
	CodeMethodNotAllowed    Code = "method_not_allowed"
	CodeUsageInvariant      Code = "usage_invariant"
)

// CodeInfo is one row of the error-code table.
type CodeInfo struct {
	// Code is the stable wire string.
	Code Code
	// HTTPStatus is the status an HTTP gateway answers with.
	HTTPStatus int
	// Retryable reports whether the same request may succeed if tried
	// again unchanged (a worker answers it with NakWithDelay rather than
	// TermWithReason, and a client may resubmit it with the same id).
	Retryable bool
	// Description is a one-line explanation for humans.
	Description string
}

// codeTable is the one table of error codes. Append new rows at the end of
// their group; never change a Code string once released.
var codeTable = []CodeInfo{
	{CodeInvalidRequest, 400, false, "The request breaks a rule of the contract; the field path and message say which."},
	{CodeMalformedJSON, 400, false, "The body is not well-formed JSON (syntax error, truncated input, trailing data)."},
	{CodeMissingMessages, 400, false, "The request has no messages."},
	{CodeUnknownModel, 404, false, "The model is not served by this deployment: refused at submit when workers are live and none serves the model or served it lately (the message lists the served models; submit with wait_for_model to queue it for a worker yet to start), or by a worker for a job whose body names a model it does not serve."},
	{CodePromptTooLong, 400, false, "The tokenized prompt plus max_tokens does not fit the model's context window."},
	{CodeMaxTokensOutOfRange, 400, false, "max_tokens is negative or above the configured ceiling."},
	{CodeInvalidSampling, 400, false, "A sampling parameter (temperature, top_p, top_k, min_p, repetition_penalty, logprobs, stop_sequences) is out of range."},
	{CodeUnknownPreset, 400, false, "preset is not one of concise, balanced, detailed, creative."},
	{CodeUnknownTool, 400, false, "A tool name is not one of the inline tools."},
	{CodeInvalidSchema, 400, false, "A JSON Schema cannot be compiled; the message names the keyword and where."},
	{CodeInvalidRegex, 400, false, "A regular expression is not valid RE2 syntax."},
	{CodeRequestTooLarge, 413, false, "The request body is larger than the configured byte limit."},
	{CodeUnsupportedContract, 400, false, "The Zl-Contract header names a contract version this component does not speak."},
	{CodeUnauthenticated, 401, false, "The HTTP request carries no API key, or one the gateway does not know."},
	{CodeMemoryLimit, 422, false, "The job cannot fit its memory cap (max_memory_mb), or asks for more than a worker allows."},
	{CodeToolExecutionFailed, 422, false, "An inline tool failed inside the decode loop; tool and tool_code say which and why."},
	{CodeDeadlineExceeded, 504, false, "The job's deadline passed before it finished."},
	{CodeCanceled, 499, false, "The job was canceled by its submitter."},
	{CodeNotFound, 404, false, "No job, result, batch, file or route with that id or path is known (it may have expired)."},
	{CodeUnavailable, 503, true, "A dependency (NATS, JetStream, storage) is unreachable or full; try again later."},
	{CodeWorkerShutdown, 503, true, "The worker stopped while running the job; it is redelivered to another worker."},
	{CodeInternal, 500, true, "An unexpected failure inside zerolayer; retried up to MaxDeliver, then dead-lettered."},
	{CodeRateLimited, 429, true, "The tenant is over its requests-per-minute or tokens-per-minute limit; submit again after retry_after_ms (HTTP Retry-After). Nothing ran, nothing is charged; a job a worker refused has a stored result under its id, so resubmit it under a new id."},
	{CodeConcurrencyLimited, 429, true, "The tenant already has as many jobs in flight as its concurrency limit allows; submit again after retry_after_ms. Nothing ran, nothing is charged (resubmit under a new id as for rate_limited)."},
	{CodeSpendLimitExceeded, 429, false, "The tenant's month-to-date charges plus the estimated cost of its jobs in flight would pass its monthly spend limit. Nothing ran, nothing is charged."},
	{CodeOverloaded, 503, true, "The job queue is at its limit (ZL_JOBS's message or byte cap, or the server's storage): the workers are behind. Nothing was queued; submit again later (the same id is safe)."},
	{CodeMethodNotAllowed, 405, false, "The HTTP gateway serves that path, but not with that method; the Allow header lists the ones it takes."},
	{CodeUsageInvariant, 422, false, "A usage record breaks a relation between its fields that pricing needs (cached_input_tokens above input_tokens); billing refuses it rather than bill a guess."},
}

// codeIndex maps a code to its row in codeTable.
var codeIndex = func() map[Code]int {
	m := make(map[Code]int, len(codeTable))
	for i, c := range codeTable {
		if _, dup := m[c.Code]; dup {
			panic("contracts: duplicate error code " + string(c.Code))
		}
		m[c.Code] = i
	}
	return m
}()

// Codes returns a copy of the error-code table in its documented order.
func Codes() []CodeInfo {
	out := make([]CodeInfo, len(codeTable))
	copy(out, codeTable)
	return out
}

// Error returns the code string, so that a Code can be used as an errors.Is
// target.
func (c Code) Error() string { return string(c) }

// Known reports whether c is in this version's table.
func (c Code) Known() bool {
	_, ok := codeIndex[c]
	return ok
}

// Info returns c's row of the table. A code this version does not know gets
// HTTP status 500, not retryable, and an empty description.
func (c Code) Info() CodeInfo {
	if i, ok := codeIndex[c]; ok {
		return codeTable[i]
	}
	return CodeInfo{Code: c, HTTPStatus: 500}
}

// Retryable reports whether c's table row marks it retryable.
func (c Code) Retryable() bool { return c.Info().Retryable }

// HTTPStatus returns the HTTP status of c's table row.
func (c Code) HTTPStatus() int { return c.Info().HTTPStatus }

// ToolCode says why an inline tool failed; it rides with
// [CodeToolExecutionFailed] in [Error.ToolCode]. The strings are upper case
// on the wire, as in {"code": "tool_execution_failed", "tool": "regex_matcher",
// "tool_code": "TOOL_TIMEOUT"}.
type ToolCode string

// The tool failure codes.
const (
	// ToolMemoryExhausted: the tool went over its share of the job's memory.
	ToolMemoryExhausted ToolCode = "TOOL_MEMORY_EXHAUSTED"
	// ToolTimeout: the tool went over its time or step budget.
	ToolTimeout ToolCode = "TOOL_TIMEOUT"
	// ToolConstraintUnsatisfiable: a constraint left no token to choose
	// (the grammar or pattern cannot be completed).
	ToolConstraintUnsatisfiable ToolCode = "TOOL_CONSTRAINT_UNSATISFIABLE"
	// ToolValidationFailed: the final output failed the tool's check (for
	// example JSON that does not match the schema) after its retries.
	ToolValidationFailed ToolCode = "TOOL_VALIDATION_FAILED"
	// ToolInternal: the tool failed for a reason of its own.
	ToolInternal ToolCode = "TOOL_INTERNAL"
	// ToolStepBudget: a tool used up its step budget (fuel) in one call.
	ToolStepBudget ToolCode = "TOOL_STEP_BUDGET"
	// ToolCompileFailed: a tool's parameters (schema, pattern, word list)
	// could not be compiled: an unsupported keyword, an invalid or
	// oversized pattern.
	ToolCompileFailed ToolCode = "TOOL_COMPILE_FAILED"
)

// toolCodeDocs lists every ToolCode with its meaning, for errors.md.
var toolCodeDocs = []struct {
	code ToolCode
	doc  string
}{
	{ToolMemoryExhausted, "The tool went over its share of the job's memory."},
	{ToolTimeout, "The tool went over its time or step budget."},
	{ToolConstraintUnsatisfiable, "A constraint left no token to choose (the grammar or pattern cannot be completed)."},
	{ToolValidationFailed, "The final output failed the tool's check after its retries."},
	{ToolInternal, "The tool failed for a reason of its own."},
	{ToolStepBudget, "The tool used up its step budget (fuel) in one call."},
	{ToolCompileFailed, "The tool's parameters could not be compiled (unsupported keyword, invalid or oversized pattern)."},
}

// Error is a contract error: the wire form of every failure a client sees,
// and the Go error the contracts functions return. Field is the JSON path of
// the offending request field (messages[2].role, tools[0].params.schema)
// when there is one; Tool is the inline tool's name when a tool is at fault.
type Error struct {
	// Code is the stable code from the table.
	Code Code `json:"code"`
	// Message explains the problem for humans; its wording may change.
	Message string `json:"message"`
	// Field is the JSON path of the request field at fault, if any.
	Field string `json:"field,omitempty"`
	// Tool names the inline tool at fault, if any.
	Tool string `json:"tool,omitempty"`
	// ToolCode says why the tool failed, with CodeToolExecutionFailed.
	ToolCode ToolCode `json:"tool_code,omitempty"`
	// RetryAfterMs, with a limit code (rate_limited, concurrency_limited,
	// spend_limit_exceeded), is how many milliseconds to wait before
	// submitting again; the HTTP gateway sends it as Retry-After too.
	// Zero when there is no estimate.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// RetryAfter returns RetryAfterMs as a duration.
func (e *Error) RetryAfter() time.Duration { return time.Duration(e.RetryAfterMs) * time.Millisecond }

// NewError returns an *Error with the given code and a formatted message.
func NewError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// fieldError returns an *Error about one request field.
func fieldError(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Error formats e as "code: field: message", leaving out empty parts.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Tool != "" {
		b.WriteString(": tool ")
		b.WriteString(e.Tool)
		if e.ToolCode != "" {
			b.WriteString(" (" + string(e.ToolCode) + ")")
		}
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is reports whether target is the same code: a [Code], or an *Error with
// the same Code (whatever its message).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t != nil && e.Code == t.Code
	}
	return false
}

// Retryable reports whether the code is retryable (see [CodeInfo]).
func (e *Error) Retryable() bool { return e.Code.Retryable() }

// HTTPStatus returns the code's HTTP status.
func (e *Error) HTTPStatus() int { return e.Code.HTTPStatus() }

// ValidationError holds every problem found in a request, in field order.
// It matches errors.Is for each problem's code, and errors.As finds the
// first problem as an *Error.
type ValidationError struct {
	// Problems lists each problem with its field path; never empty.
	Problems []*Error
}

// Error joins the problems on one line.
func (v *ValidationError) Error() string {
	parts := make([]string, len(v.Problems))
	for i, p := range v.Problems {
		parts[i] = p.Error()
	}
	if len(parts) == 1 {
		return "invalid job request: " + parts[0]
	}
	return fmt.Sprintf("invalid job request (%d problems): %s", len(parts), strings.Join(parts, "; "))
}

// Unwrap returns the problems, so that errors.Is and errors.As look at each.
func (v *ValidationError) Unwrap() []error {
	out := make([]error, len(v.Problems))
	for i, p := range v.Problems {
		out[i] = p
	}
	return out
}

// Retryable is false: an invalid request stays invalid.
func (v *ValidationError) Retryable() bool { return false }

// ErrorFrom turns any error into the single *Error that goes on the wire
// (an error event, a result, a DLQ record, an HTTP body). An *Error is
// returned as is; a *ValidationError becomes its first problem with the
// others appended to the message; context.Canceled and
// context.DeadlineExceeded become CodeCanceled and CodeDeadlineExceeded; a
// bare [Code] gets its table description; anything else is CodeInternal
// with err's text. ErrorFrom(nil) is nil.
func ErrorFrom(err error) *Error {
	if err == nil {
		return nil
	}
	var v *ValidationError
	if errors.As(err, &v) && len(v.Problems) > 0 {
		first := *v.Problems[0]
		if n := len(v.Problems); n > 1 {
			rest := make([]string, 0, n-1)
			for _, p := range v.Problems[1:] {
				rest = append(rest, p.Error())
			}
			first.Message += fmt.Sprintf(" (and %d more: %s)", n-1, strings.Join(rest, "; "))
		}
		return &first
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var c Code
	if errors.As(err, &c) {
		return &Error{Code: c, Message: c.Info().Description}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeDeadlineExceeded, Message: err.Error()}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// ErrServerTooOld reports a NATS server older than MinServerVersion; the
// error that wraps it is a *ServerVersionError naming both versions.
var ErrServerTooOld = errors.New("contracts: NATS server too old")

// ServerVersionError reports the version of a NATS server that is too old,
// or whose version cannot be read. It matches ErrServerTooOld.
type ServerVersionError struct {
	// Found is the version the server announced ("" when not connected).
	Found string
	// Min is the oldest version zerolayer runs against: MinServerVersion.
	Min string
}

func (e *ServerVersionError) Error() string {
	if e.Found == "" {
		return fmt.Sprintf("contracts: the NATS server's version is unknown (not connected?); zerolayer needs nats-server %s or newer", e.Min)
	}
	return fmt.Sprintf("contracts: the NATS server runs version %s, but zerolayer needs nats-server %s or newer (for stream metadata); upgrade the server", e.Found, e.Min)
}

// Is reports whether target is ErrServerTooOld.
func (e *ServerVersionError) Is(target error) bool { return target == ErrServerTooOld }
