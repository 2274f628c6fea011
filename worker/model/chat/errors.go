package chat

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownTemplate is returned by Detect for a chat template of no family
// this package renders. The concrete error is an *UnknownTemplateError.
var ErrUnknownTemplate = errors.New("chat: unknown chat template")

// ErrUnknownName is returned by Named for a name that is not a template family.
var ErrUnknownName = errors.New("chat: unknown template name")

// ErrNoMessages is returned by Render when there is neither a system prompt nor
// any message to render.
var ErrNoMessages = errors.New("chat: no messages to render")

// ErrInvalidRole is returned by Render for a message whose role is not
// system, user or assistant. The concrete error is a *MessageError.
var ErrInvalidRole = errors.New("chat: invalid message role")

// ErrRoleOrder is returned by Render when the messages are in an order the
// template does not allow, such as two user turns in a row for llama2. The
// concrete error is a *MessageError.
var ErrRoleOrder = errors.New("chat: invalid message order")

// ErrToolsUnsupported is returned by RenderWith for tool definitions, tool
// calls or tool messages given to a template that cannot render them (see
// Template.SupportsTools), or in a shape the template refuses (llama3.1
// renders one tool call per message).
var ErrToolsUnsupported = errors.New("chat: tools not supported by this template")

// ErrInvalidTool is returned by RenderWith for a tool definition or tool
// call that is not well formed: a definition that is not a JSON object,
// call arguments that are not JSON, a mistral-nemo call id that is not nine
// letters or digits.
var ErrInvalidTool = errors.New("chat: invalid tool definition or call")

// UnknownTemplateError is the error Detect returns for an unrecognised
// template. It matches ErrUnknownTemplate with errors.Is.
type UnknownTemplateError struct {
	// Excerpt is the start of the template, whitespace collapsed, cut to
	// sixty characters.
	Excerpt string
	// Hash is the first 16 hex digits of the SHA-256 of the whole template
	// as given, which tells templates with the same start apart.
	Hash string
	// Reason, when not empty, says why a template that resembles a known
	// family was still refused.
	Reason string
}

// Error names the excerpt, the hash and how to choose a template instead.
func (e *UnknownTemplateError) Error() string {
	reason := ""
	if e.Reason != "" {
		reason = " (" + e.Reason + ")"
	}
	return fmt.Sprintf("chat: unknown chat template %q (sha256 %s)%s: select one by name (%s)",
		e.Excerpt, e.Hash, reason, strings.Join(Names(), ", "))
}

// Is reports whether target is ErrUnknownTemplate.
func (e *UnknownTemplateError) Is(target error) bool { return target == ErrUnknownTemplate }

// MessageError reports a message that a template cannot render. It unwraps to
// ErrInvalidRole, ErrRoleOrder, ErrToolsUnsupported or ErrInvalidTool.
type MessageError struct {
	// Template is the name of the template that refused the message.
	Template string
	// Index is the position of the message in the list passed to Render; -1
	// stands for the system argument.
	Index int
	// Role is the message's role as given.
	Role string
	// Reason says what the template expected instead.
	Reason string
	// Err is ErrInvalidRole, ErrRoleOrder, ErrToolsUnsupported or
	// ErrInvalidTool.
	Err error
}

// Error describes the message and what was expected.
func (e *MessageError) Error() string {
	where := fmt.Sprintf("message %d", e.Index)
	if e.Index < 0 {
		where = "system prompt"
	}
	return fmt.Sprintf("%v: %s template, %s (role %q): %s", e.Err, e.Template, where, e.Role, e.Reason)
}

// Unwrap returns the sentinel the error belongs to.
func (e *MessageError) Unwrap() error { return e.Err }
