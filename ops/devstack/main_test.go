package devstack_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: a part
// of the stack that Stop did not stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
