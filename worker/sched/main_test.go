package sched

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running (a step
// loop not stopped, a kernel pool not closed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
