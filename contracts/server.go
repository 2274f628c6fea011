package contracts

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
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
// announces it ("2.10.22", "v2.11.0-RC.1"). A pre-release is older than
// its release; a version that does not parse is refused.
func CheckServerVersion(version string) error {
	found, ok := parseVersion(version)
	minimum, _ := parseVersion(MinServerVersion)
	if !ok || compareVersions(found, minimum) < 0 {
		return &ServerVersionError{Found: version, Min: MinServerVersion}
	}
	return nil
}

// version is major, minor, patch and whether it is a pre-release.
type version struct {
	n   [3]int
	pre bool
}

func parseVersion(s string) (version, bool) {
	s = strings.TrimPrefix(s, "v")
	s, _, _ = strings.Cut(s, "+") // build metadata does not order
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 || hasPre && pre == "" {
		return version{}, false
	}
	var v version
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return version{}, false
		}
		v.n[i] = n
	}
	v.pre = hasPre
	return v, true
}

// compareVersions returns -1, 0 or 1 as a is older than, the same as, or
// newer than b. Pre-releases of one version are not ordered among
// themselves.
func compareVersions(a, b version) int {
	for i := range a.n {
		switch {
		case a.n[i] < b.n[i]:
			return -1
		case a.n[i] > b.n[i]:
			return 1
		}
	}
	switch {
	case a.pre && !b.pre:
		return -1
	case !a.pre && b.pre:
		return 1
	}
	return 0
}
