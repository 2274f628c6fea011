package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a
// worker not stopped, a lease keeper, a scheduler loop, a NATS or billing
// client not closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
