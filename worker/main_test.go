package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a
// worker not stopped, a lease keeper, a scheduler loop, a NATS or billing
// client not closed.
//
// Two goroutines of the embedded nats-server are let be: a stream's file
// store whose flush loop outlives its server, and the access-time ticker
// that store keeps registered (nats-server v2.15.2). Seen about one run in
// five of this package on a loaded 2-core machine, after the cluster
// tests shut nodes down and restart them mid-run; they belong to the
// server's shutdown, not to anything the worker starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"))
}
