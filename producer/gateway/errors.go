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

// errObjectChanged is an object replaced while it was being read again:
// the bytes delivered and the ones to come are of different objects.
var errObjectChanged = errors.New("the object changed while it was read")

// errObjectShort is a read of an object that ended before its size
// without an error: the reader lost chunks.
var errObjectShort = errors.New("the object store's reader ended before the object did")

// errObjectCorrupt is an object whose bytes, read whole, are not its size
// or do not hash to its digest.
var errObjectCorrupt = errors.New("the bytes read do not match the object's size and SHA-256 digest")

// objectWriteError is the failure of the writer an object is copied to
// (the client went away, the disk is full): not the store's, and not
// mended by reading again.
type objectWriteError struct{ err error }

func (e *objectWriteError) Error() string { return "writing the object: " + e.err.Error() }
func (e *objectWriteError) Unwrap() error { return e.err }
