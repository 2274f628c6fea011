package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a
// gateway, a worker or a scheduler not stopped, a NATS client not closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
