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

// UnknownTemplateError is the error Detect returns for an unrecognised
// template. It matches ErrUnknownTemplate with errors.Is.
type UnknownTemplateError struct {
	// Excerpt is the start of the template, whitespace collapsed, cut to a
	// few dozen characters.
	Excerpt string
}

// Error names the excerpt and how to choose a template instead.
func (e *UnknownTemplateError) Error() string {
	return fmt.Sprintf("chat: unknown chat template %q: select one by name (%s)",
		e.Excerpt, strings.Join(Names(), ", "))
}

// Is reports whether target is ErrUnknownTemplate.
func (e *UnknownTemplateError) Is(target error) bool { return target == ErrUnknownTemplate }

// MessageError reports a message that a template cannot render. It unwraps to
// ErrInvalidRole or ErrRoleOrder.
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
	// Err is ErrInvalidRole or ErrRoleOrder.
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
