// Package poll is the module's one way for a test to wait for something
// to happen: poll a condition until it holds or a deadline passes, rather
// than sleep and hope. Only tests import it.
//
//	poll.Until(t, 30*time.Second, "the batch ended", func() bool {
//		return state(t).Status == "ended"
//	})
package poll

import (
	"testing"
	"time"
)

// Interval is the time between two calls of a condition.
const Interval = 20 * time.Millisecond

// Until calls cond every Interval until it returns true, and fails t
// (Fatalf, naming what it waited for) when timeout passes first. cond runs
// on the calling goroutine and may itself fail t.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(Interval)
	}
}
