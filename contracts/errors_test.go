package contracts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// errorsDoc renders errors.md from the code table.
func errorsDoc() []byte {
	var b bytes.Buffer
	b.WriteString("# zerolayer error codes\n\n")
	b.WriteString("<!-- Generated from codeTable in errors.go by `go test ./contracts -run TestErrorsDoc -update`. Do not edit. -->\n\n")
	fmt.Fprintf(&b, "Contract version %s. Every failure a client sees carries one of these codes in\n", ContractVersion)
	b.WriteString("`error.code`. Codes are stable: they are never renamed or reused. Readers must\n")
	b.WriteString("tolerate codes added later (treat them as not retryable, HTTP 500).\n\n")
	b.WriteString("| code | HTTP | retryable | meaning |\n|---|---|---|---|\n")
	for _, c := range Codes() {
		fmt.Fprintf(&b, "| `%s` | %d | %v | %s |\n", c.Code, c.HTTPStatus, c.Retryable, c.Description)
	}
	b.WriteString("\n## Tool failure codes\n\n")
	b.WriteString("With `tool_execution_failed`, `error.tool` names the tool and `error.tool_code` says why:\n\n")
	b.WriteString("| tool_code | meaning |\n|---|---|\n")
	for _, tc := range toolCodeDocs {
		fmt.Fprintf(&b, "| `%s` | %s |\n", tc.code, tc.doc)
	}
	return b.Bytes()
}

func TestErrorsDoc(t *testing.T) {
	got := errorsDoc()
	if *update {
		if err := os.WriteFile("errors.md", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("errors.md is stale; run go test ./contracts -run TestErrorsDoc -update")
	}
	for _, c := range Codes() {
		if !bytes.Contains(want, []byte("| `"+string(c.Code)+"` |")) {
			t.Errorf("errors.md does not document %s", c.Code)
		}
	}
}

func TestCodeTable(t *testing.T) {
	t.Parallel()
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c.Code] {
			t.Errorf("duplicate code %s", c.Code)
		}
		seen[c.Code] = true
		if !c.Code.Known() {
			t.Errorf("%s not Known", c.Code)
		}
		if strings.ToLower(string(c.Code)) != string(c.Code) || strings.ContainsAny(string(c.Code), " .-") {
			t.Errorf("code %q is not lower snake_case", c.Code)
		}
		if c.HTTPStatus < 400 || c.HTTPStatus > 599 {
			t.Errorf("%s: HTTP status %d is not an error status", c.Code, c.HTTPStatus)
		}
		if c.HTTPStatus != 499 && http.StatusText(c.HTTPStatus) == "" {
			t.Errorf("%s: HTTP status %d is unknown", c.Code, c.HTTPStatus)
		}
		if c.Description == "" || strings.Contains(c.Description, "\n") {
			t.Errorf("%s: description must be one non-empty line", c.Code)
		}
	}
	// The codes the contract names must all be there.
	for _, c := range []Code{"invalid_request", "malformed_json", "missing_messages", "unknown_model",
		"prompt_too_long", "max_tokens_out_of_range", "invalid_sampling", "unknown_preset", "unknown_tool",
		"invalid_schema", "invalid_regex", "request_too_large", "memory_limit", "tool_execution_failed",
		"deadline_exceeded", "canceled", "internal", "worker_shutdown"} {
		if !seen[c] {
			t.Errorf("code %s missing from the table", c)
		}
	}
	for _, tc := range toolCodeDocs {
		if strings.ToUpper(string(tc.code)) != string(tc.code) {
			t.Errorf("tool code %s is not upper case", tc.code)
		}
	}
	if u := Code("from_the_future"); u.Known() || u.Retryable() || u.HTTPStatus() != 500 {
		t.Errorf("unknown code: Known %v Retryable %v HTTP %d", u.Known(), u.Retryable(), u.HTTPStatus())
	}
}

func TestErrorIsAndRetryable(t *testing.T) {
	t.Parallel()
	e := &Error{Code: CodeUnknownTool, Message: "tool \"shell\"", Field: "tools[0].name", Tool: "shell"}
	wrapped := fmt.Errorf("submit: %w", e)
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"code", wrapped, CodeUnknownTool, true},
		{"other code", wrapped, CodeUnknownModel, false},
		{"error with same code", wrapped, &Error{Code: CodeUnknownTool}, true},
		{"error with other code", wrapped, &Error{Code: CodeInternal}, false},
		{"validation error", &ValidationError{Problems: []*Error{{Code: CodeInvalidSampling}, e}}, CodeUnknownTool, true},
		{"validation error miss", &ValidationError{Problems: []*Error{{Code: CodeInvalidSampling}}}, CodeUnknownTool, false},
		{"nil target error", wrapped, (*Error)(nil), false},
	}
	for _, tt := range tests {
		if got := errors.Is(tt.err, tt.target); got != tt.want {
			t.Errorf("%s: errors.Is = %v, want %v", tt.name, got, tt.want)
		}
	}
	if e.Retryable() || !(&Error{Code: CodeWorkerShutdown}).Retryable() {
		t.Error("Retryable does not follow the table")
	}
	var r interface{ Retryable() bool }
	if !errors.As(wrapped, &r) || r.Retryable() {
		t.Error("errors.As to a Retryable interface failed")
	}
	if got, want := e.Error(), `unknown_tool: tool shell: tools[0].name: tool "shell"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e.HTTPStatus() != 400 {
		t.Errorf("HTTPStatus = %d", e.HTTPStatus())
	}
}

func TestErrorFrom(t *testing.T) {
	t.Parallel()
	e := &Error{Code: CodeUnknownModel, Message: "m", Field: "model"}
	v := &ValidationError{Problems: []*Error{
		{Code: CodeMissingMessages, Field: "messages", Message: "none"},
		{Code: CodeInvalidSampling, Field: "top_p", Message: "bad"},
	}}
	tests := []struct {
		name      string
		err       error
		wantCode  Code
		wantField string
		wantMsg   string
	}{
		{"error", fmt.Errorf("x: %w", e), CodeUnknownModel, "model", "m"},
		{"validation", v, CodeMissingMessages, "messages", "none (and 1 more: invalid_sampling: top_p: bad)"},
		{"code", fmt.Errorf("dial: %w", CodeUnavailable), CodeUnavailable, "", CodeUnavailable.Info().Description},
		{"canceled", fmt.Errorf("stop: %w", context.Canceled), CodeCanceled, "", "stop: context canceled"},
		{"deadline", context.DeadlineExceeded, CodeDeadlineExceeded, "", "context deadline exceeded"},
		{"other", errors.New("boom"), CodeInternal, "", "boom"},
	}
	for _, tt := range tests {
		got := ErrorFrom(tt.err)
		if got.Code != tt.wantCode || got.Field != tt.wantField || got.Message != tt.wantMsg {
			t.Errorf("%s: ErrorFrom = %+v, want code %s field %q message %q", tt.name, got, tt.wantCode, tt.wantField, tt.wantMsg)
		}
	}
	if ErrorFrom(nil) != nil {
		t.Error("ErrorFrom(nil) != nil")
	}
	// ErrorFrom must not change the problems it summarises.
	if v.Problems[0].Message != "none" {
		t.Error("ErrorFrom modified the ValidationError")
	}
}
