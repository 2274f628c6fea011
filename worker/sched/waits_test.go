package sched

import (
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zerolayer/zerolayer/worker/model/modeltest"
)

// TestWaitReasons: the steps run while jobs wait are told apart by what
// held the jobs out, and occupancy counts only those where memory or a
// slot did (a queue held by the prefill budget says nothing of how well
// admission packs the arena).
func TestWaitReasons(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	r := rand.New(rand.NewPCG(3, 4))
	jobsOf := func(n, promptLen, maxTok int) []job {
		var jobs []job
		for range n {
			p := []int32{1}
			for len(p) < promptLen {
				p = append(p, int32(2+r.IntN(400)))
			}
			jobs = append(jobs, job{prompt: p, max: maxTok})
		}
		return jobs
	}
	for _, c := range []struct {
		name string
		cfg  Config
		jobs []job
		want func(WaitSteps) bool
	}{
		// 8 blocks a job at its end (100 + 24 tokens) in a 24-block
		// arena, the prefill budget ample: memory holds the queue.
		{"memory", Config{KVBlocks: 24, MaxBatchTokens: 512, MaxStepLatency: -1, NoDrafts: true, HostSwapMB: 16}, jobsOf(8, 100, 24),
			func(w WaitSteps) bool { return w.Memory > 0 && w.Compute == 0 }},
		// One running sequence at a time, memory ample.
		{"slots", Config{KVBlocks: 200, MaxRunning: 1, MaxStepLatency: -1, NoDrafts: true}, jobsOf(4, 20, 8),
			func(w WaitSteps) bool { return w.Slots > 0 && w.Memory == 0 }},
		// Memory ample, a prompt's worth of prefill per step: the
		// prefill budget holds the queue.
		{"prefill budget", Config{KVBlocks: 200, MaxBatchTokens: 100, MaxStepLatency: -1, NoDrafts: true}, jobsOf(6, 100, 8),
			func(w WaitSteps) bool { return w.Compute > 0 && w.Memory == 0 && w.Slots == 0 }},
	} {
		m := NewMetrics()
		c.cfg.Metrics = m
		s := newQueued(t, l, c.cfg)
		outs := startQueued(t, s, c.jobs, func(jobs []job) []outcome { return run(s, jobs) })
		for i, o := range outs {
			if o.err != nil {
				t.Fatalf("%s: job %d: %v", c.name, i, o.err)
			}
		}
		w, a := s.WaitSteps(), s.ArenaWhileWaiting()
		_, occ, steps := s.Utilization()
		t.Logf("%s: %d steps, waits %+v, arena while waiting %+v, occupancy %.3f", c.name, steps, w, a, occ)
		if !c.want(w) {
			t.Errorf("%s: waits %+v", c.name, w)
		}
		// The metric counts what WaitSteps reports.
		for i, n := range []int64{w.Memory, w.Slots, w.Compute, w.Prefix} {
			if got := testutil.ToFloat64(m.waitSteps[i]); got != float64(n) {
				t.Errorf("%s: zerolayer_wait_steps_total{reason=%q} %v, want %d", c.name, heldNames[i], got, n)
			}
		}
		if w.Memory+w.Slots+w.Compute+w.Prefix > steps {
			t.Errorf("%s: %+v: more waiting steps than the %d steps", c.name, w, steps)
		}
		// Occupancy is over the steps memory or a slot held jobs.
		if a.Steps != w.Memory+w.Slots || a.InUse != occ {
			t.Errorf("%s: occupancy %.3f over %d steps, waits %+v", c.name, occ, a.Steps, w)
		}
		if sum := a.InUse + a.Promised + a.Growth + a.Free; a.Steps > 0 && (sum < 0.999 || sum > 1.001) {
			t.Errorf("%s: arena shares %+v sum to %.3f", c.name, a, sum)
		}
		if c.name == "memory" && a.InUse < 0.5 {
			t.Errorf("memory: %.1f%% of the arena in use while jobs waited for it", 100*a.InUse)
		}
		checkIdle(t, s)
	}
}
