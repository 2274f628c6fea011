package contracts

import (
	"strings"

	"github.com/nats-io/nats.go"
	"golang.org/x/mod/semver"
)

// MinServerVersion is the oldest nats-server the workers and billing run
// against. It is 2.10 because EnsureStreams stamps every stream with the
// contract version in its metadata (zl_contract): stream metadata came
// with 2.10, and an older server drops it without an error, so a stream
// would carry no contract version. (Everything else zerolayer uses, the
// work-queue stream with one filtered pull consumer per class, direct get
// and key-value buckets, is 2.9; 2.9 itself is out of support.)
const MinServerVersion = "2.10.0"

// CheckServer returns a *ServerVersionError (matching ErrServerTooOld)
// when nc is connected to a server older than MinServerVersion, or to none.
// Workers and billing call it at Start, so that an old server is refused
// with a message naming both versions rather than failing later in a way
// that hides the cause.
func CheckServer(nc *nats.Conn) error {
	return CheckServerVersion(nc.ConnectedServerVersion())
}

// CheckServerVersion is CheckServer for a version string as a server
// announces it ("2.10.22", "v2.11.0-RC.1"), compared as semantic versions
// (golang.org/x/mod/semver: a pre-release is older than its release). A
// version that is not a full major.minor.patch is refused.
func CheckServerVersion(version string) error {
	v := "v" + strings.TrimPrefix(version, "v")
	full, _, _ := strings.Cut(v, "+") // build metadata does not order
	if semver.Canonical(v) != full || semver.Compare(v, "v"+MinServerVersion) < 0 {
		return &ServerVersionError{Found: version, Min: MinServerVersion}
	}
	return nil
}
