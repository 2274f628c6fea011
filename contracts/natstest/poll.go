package natstest

import (
	"testing"
	"time"
)

// PollInterval is the time between two calls of an Until condition.
const PollInterval = 20 * time.Millisecond

// Until is how a test waits for something to happen: it calls cond every
// PollInterval until it returns true, and fails t (Fatalf, naming what it
// waited for) when timeout passes first — rather than sleep and hope.
// cond runs on the calling goroutine and may itself fail t.
//
//	natstest.Until(t, 30*time.Second, "the batch ended", func() bool {
//		return state(t).Status == "ended"
//	})
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(PollInterval)
	}
}
