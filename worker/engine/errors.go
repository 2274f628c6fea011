package engine

import "errors"

// ErrPromptTooLong is returned when a prompt does not fit in the model's
// context window.
var ErrPromptTooLong = errors.New("engine: prompt longer than the context")

// ErrEmptyPrompt is returned for a request with no prompt tokens.
var ErrEmptyPrompt = errors.New("engine: empty prompt")

// ErrBadRequest is returned for out-of-range request fields.
var ErrBadRequest = errors.New("engine: bad request")

// ErrNoMemory is returned when the KV arena cannot hold a request even when
// it runs alone.
var ErrNoMemory = errors.New("engine: not enough KV memory")
