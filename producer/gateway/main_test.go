package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a
// gateway, a worker or a scheduler not stopped, a NATS client not closed.
// One goroutine of nats.go is let be: each object store Put makes its own
// JetStream context, whose reconnect watcher, when it first runs after the
// Put has already removed its status channel (a small object, a busy
// machine), waits on a nil channel for good (nats.go v1.55.0,
// jetstream/publish.go; about one Put in a thousand under the parallel
// tests). It is nats.go's, not the gateway's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
