package sched

import (
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// TestRoomPullsHigherClassesIntoAFullWorker fills the running set with
// low-priority jobs: the intake may no longer pull low (or normal) jobs,
// but it may pull a high one, for which admission preempts; at most
// LookAhead jobs of a class wait. An arena too small for a bucket's largest
// prompt is judged by the bucket's smallest one, not closed for good.
func TestRoomPullsHigherClassesIntoAFullWorker(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	s := newSched(t, l, Config{MaxRunning: 2, KVBlocks: 64, BlockTokens: 16})
	prompt := reference(t)[0].PromptIDs
	const short, medium = 64, 512
	if s.Room(2, "", 0, short) == 0 {
		t.Fatal("an idle scheduler refuses a short low-priority job")
	}
	// Long low-priority generations fill both slots (more of them than
	// slots, so the set stays full while the test looks).
	const lows = 12
	done := make(chan outcome, lows)
	for range lows {
		go func() { done <- run(s, []job{{prompt: prompt, max: 400, opts: JobOpts{Tenant: "a", Class: 2}}})[0] }()
	}
	// (The step loop publishes what Room reads after every step.)
	waitFor(t, 10*time.Second, "both slots held by low jobs: low refused, normal and high pulled", func() bool {
		return s.snapRunning.Load() == 2 && s.snapBelowJobs[0].Load() == 2 && s.Room(2, "", 0, short) == 0 && s.Room(1, "", 0, short) > 0 && s.Room(0, "", 0, short) > 0
	})
	// Ten of tenant a's jobs wait, more than LookAheadTenants: another
	// tenant still gets its one job into the look-ahead (a low_latency
	// job among them waited 1.5 s in JetStream when a's batch closed it).
	if n := s.Room(2, "c", 0, short); n != 1 {
		t.Errorf("with %d of tenant a's jobs waiting, Room for tenant c's first = %d, want 1", lows-2, n)
	}
	// The high job is pulled, admitted by preempting, and finishes first.
	high := run(s, []job{{prompt: prompt, max: 8, opts: JobOpts{Tenant: "b", Class: 0}}})[0]
	if high.err != nil {
		t.Fatal(high.err)
	}
	for range lows {
		if o := <-done; o.err != nil {
			t.Fatal(o.err)
		}
	}
	if high.stats.QueueSteps > 3 {
		t.Errorf("the high job waited %d steps for admission", high.stats.QueueSteps)
	}
	checkIdle(t, s)
	// A medium bucket whose largest prompt (512 tokens, 33 blocks) can
	// never fit in a 24-block arena is still pulled when its smallest
	// fits.
	s = newSched(t, l, Config{KVBlocks: 24, BlockTokens: 16})
	waitFor(t, 10*time.Second, "a medium job pulled into the idle 24-block arena", func() bool { return s.Room(1, "", short, medium) > 0 })
	checkIdle(t, s)
}
