package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a
// gateway, a worker or a scheduler not stopped, a NATS client not closed.
//
// One goroutine of nats.go's (v1.55.0) is let be: an object store Put
// clears its publisher's status channel when it returns, and the goroutine
// its first asynchronous publish started may read the channel only after
// that, and then waits on a nil channel for good. It is the library's,
// one per Put that loses the race, whatever the caller does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
