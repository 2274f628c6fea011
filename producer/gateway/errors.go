package gateway

import (
	"errors"
	"fmt"
)

// ErrPlaintextKeys is a key file in the old format, 'KEY TENANT' lines
// with the keys in plain text, which the gateway no longer reads.
var ErrPlaintextKeys = errors.New("a plain-text 'KEY TENANT' line (the old key file format): keys are stored hashed now; " +
	"issue new keys with 'zerolayer keys add --file NEW --tenant T', move the clients to them, and delete the old file")

// ErrKeyNotFound is a key id that is not in the key file.
var ErrKeyNotFound = errors.New("no such key id")

// KeyFileError is a key file that does not parse. It names the line, never
// its text: a malformed line may hold a secret.
type KeyFileError struct {
	Path string // empty when read from a reader
	Line int
	Err  error
}

func (e *KeyFileError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("key file line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *KeyFileError) Unwrap() error { return e.Err }
