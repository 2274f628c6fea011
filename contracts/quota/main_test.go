package quota_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves goroutines behind (a watcher,
// a subscription, an embedded server).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
