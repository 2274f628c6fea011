package gguf

import (
	"errors"
	"fmt"
)

// ErrFormat is wrapped by every error about a malformed or truncated file.
var ErrFormat = errors.New("gguf: malformed file")

// ErrVersion is returned for a GGUF version this package cannot read.
var ErrVersion = errors.New("gguf: unsupported version")

// FormatError describes where a file is malformed.
type FormatError struct {
	Offset int64  // byte offset where decoding failed
	What   string // what was being decoded
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: malformed file at byte %d (%s): %s", e.Offset, e.What, e.Reason)
}

// Is makes errors.Is(err, ErrFormat) true for every FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }
