package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// stepStamps are the token times of jobs that each get one token a step,
// steps period apart, job j in steps first[j] … first[j]+tokens−1, the
// tokens of a step delivered one after another, gap apart, in the order
// order(step) gives.
func stepStamps(first []int, tokens int, period, gap time.Duration, order func(step int) []int) [][]time.Time {
	t0 := time.Unix(1000, 0)
	out := make([][]time.Time, len(first))
	last := 0
	for _, f := range first {
		last = max(last, f+tokens-1)
	}
	for step := 0; step <= last; step++ {
		for k, j := range order(step) {
			if step >= first[j] && step < first[j]+tokens {
				out[j] = append(out[j], t0.Add(time.Duration(step)*period+time.Duration(k)*gap))
			}
		}
	}
	return out
}

// TestSteadyRate: N jobs decoding together get N tokens a step, so the
// rate over the span when all of them decode is N per period, exactly when
// every step delivers its tokens in the same order, whether the jobs start
// in one step or in several, and within a token a step's worth when the
// order changes from step to step. A span that ends at the first token of
// a step (counting that step's forward pass but one of its tokens) reads
// about 3 % low here and fails.
func TestSteadyRate(t *testing.T) {
	t.Parallel()
	const n, tokens = 16, 32
	period, gap := 14*time.Millisecond, 25*time.Microsecond
	want := n / period.Seconds()
	fixed := func(int) []int {
		o := make([]int, n)
		for i := range o {
			o[i] = i
		}
		return o
	}
	together := make([]int, n)
	staggered := make([]int, n)
	for j := range staggered {
		staggered[j] = j % 3
	}
	r := rand.New(rand.NewPCG(1, 2))
	shuffled := func(int) []int { return r.Perm(n) }
	for _, c := range []struct {
		name  string
		first []int
		order func(int) []int
		tol   float64
	}{
		{"one start, fixed order", together, fixed, 1e-9},
		{"three starts, fixed order", staggered, fixed, 1e-9},
		{"one start, order changing", together, shuffled, 1.0 / tokens},
	} {
		got := steadyRate(stepStamps(c.first, tokens, period, gap, c.order))
		if math.Abs(got/want-1) > c.tol {
			t.Errorf("%s: %.1f tok/s, want %.1f (±%.1g)", c.name, got, want, c.tol)
		}
	}
	if got := steadyRate([][]time.Time{{time.Unix(1, 0)}, nil}); got != 0 {
		t.Errorf("a job without tokens: %v, want 0", got)
	}
	if got := steadyRate(stepStamps(together, 1, period, gap, fixed)); got != 0 {
		t.Errorf("one token each: %v, want 0", got)
	}
}
