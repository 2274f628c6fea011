package tools

import (
	"errors"
	"fmt"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/schema"
)

// Tool failure codes this package reports, from the contracts table.
const (
	ToolStepBudget    = contracts.ToolStepBudget
	ToolCompileFailed = contracts.ToolCompileFailed
)

// toolError turns err, raised by tool name while doing phase, into the
// contract error a job fails with. Errors that already are contract errors
// pass through with the tool filled in.
func toolError(name contracts.ToolName, field string, err error) *contracts.Error {
	var ce *contracts.Error
	if errors.As(err, &ce) {
		out := *ce
		if out.Tool == "" {
			out.Tool = string(name)
		}
		if out.Field == "" {
			out.Field = field
		}
		return &out
	}
	e := &contracts.Error{Tool: string(name), Field: field, Message: err.Error()}
	var se *schema.Error
	var re *automaton.PatternError
	switch {
	case errors.As(err, &se):
		e.Code, e.ToolCode = contracts.CodeInvalidSchema, ToolCompileFailed
	case errors.As(err, &re):
		e.Code, e.ToolCode = contracts.CodeInvalidRegex, ToolCompileFailed
	case errors.Is(err, limit.ErrStepBudget):
		e.Code, e.ToolCode = contracts.CodeToolExecutionFailed, ToolStepBudget
	case errors.Is(err, limit.ErrMemory), errors.Is(err, limit.ErrTooManyThreads):
		e.Code, e.ToolCode = contracts.CodeToolExecutionFailed, contracts.ToolMemoryExhausted
	case errors.Is(err, limit.ErrCompileTimeout):
		e.Code, e.ToolCode = contracts.CodeToolExecutionFailed, contracts.ToolTimeout
	default:
		e.Code, e.ToolCode = contracts.CodeToolExecutionFailed, contracts.ToolInternal
	}
	return e
}

// runError is a failure inside the decode loop with an explicit tool code.
func runError(name contracts.ToolName, code contracts.ToolCode, format string, args ...any) *contracts.Error {
	return &contracts.Error{
		Code:     contracts.CodeToolExecutionFailed,
		Tool:     string(name),
		ToolCode: code,
		Message:  fmt.Sprintf(format, args...),
	}
}

// requestError is a bad tool declaration (missing or malformed param).
func requestError(name contracts.ToolName, field, format string, args ...any) *contracts.Error {
	return &contracts.Error{
		Code:     contracts.CodeInvalidRequest,
		Tool:     string(name),
		ToolCode: ToolCompileFailed,
		Field:    field,
		Message:  fmt.Sprintf(format, args...),
	}
}
