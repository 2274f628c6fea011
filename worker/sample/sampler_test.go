package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// logs returns the natural logs of ps, as logits whose softmax is ps.
func logs(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

// randomLogits returns n logits drawn from a fixed-seed generator.
func randomLogits(seed uint64, n int, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

func mustNew(t testing.TB, p Params) *Sampler {
	t.Helper()
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGreedy(t *testing.T) {
	t.Parallel()
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		logits  []float32
		p       Params
		history []int32
		want    int32
	}{
		{name: "single", logits: []float32{-3}, want: 0},
		{name: "clear max", logits: []float32{0.1, 2, -1, 1.9}, want: 1},
		{name: "tie goes to lowest id", logits: []float32{1, 3, 3, 2}, want: 1},
		{name: "all equal", logits: []float32{5, 5, 5}, want: 0},
		{name: "all -Inf", logits: []float32{-inf, -inf, -inf}, want: 0},
		{name: "NaN ignored", logits: []float32{nan, -1, -2}, want: 1},
		{name: "+Inf wins", logits: []float32{1, inf, 2}, want: 1},
		{name: "+Inf with penalty below 1", logits: []float32{1, inf, 2}, want: 1, p: Params{RepetitionPenalty: 0.5}, history: []int32{1}},
		{name: "penalty overflowing to -Inf", logits: []float32{-3e38, -3e38}, want: 1, p: Params{RepetitionPenalty: 2}, history: []int32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, tt.p)
			c := s.Sample(tt.logits, tt.history, 0)
			if c.ID != tt.want {
				t.Errorf("Sample() ID = %d, want %d", c.ID, tt.want)
			}
			if c.Logprob > 0 || c.Logprob != c.Logprob || c.Prob <= 0 || c.Prob > 1 {
				t.Errorf("Sample() Logprob = %v, Prob = %v; want a valid probability", c.Logprob, c.Prob)
			}
		})
	}
}

func TestSampleLeavesInputsAlone(t *testing.T) {
	t.Parallel()
	logits := []float32{2, -2, 1}
	history := []int32{0, 1}
	s := mustNew(t, Params{Temperature: 1, RepetitionPenalty: 2, Seed: 3})
	s.Sample(logits, history, 3)
	if !slices.Equal(logits, []float32{2, -2, 1}) || !slices.Equal(history, []int32{0, 1}) {
		t.Errorf("Sample() modified its inputs: logits %v, history %v", logits, history)
	}
}

// tiny is a variable so that -2*tiny is computed in float32 as Sample does.
var tiny float32 = 1e-38

func TestRepetitionPenalty(t *testing.T) {
	t.Parallel()
	base := []float32{2, -2, 0, 1, 4}
	tests := []struct {
		name    string
		p       Params
		history []int32
		want    []float32
	}{
		{name: "positive divided, negative multiplied, zero kept",
			p: Params{RepetitionPenalty: 2}, history: []int32{0, 1, 2},
			want: []float32{1, -4, 0, 1, 4}},
		{name: "repeated token penalised once",
			p: Params{RepetitionPenalty: 2}, history: []int32{0, 0, 0, 1, 1},
			want: []float32{1, -4, 0, 1, 4}},
		{name: "window of last n",
			p: Params{RepetitionPenalty: 2, RepeatLastN: 2}, history: []int32{4, 0, 3, 1},
			want: []float32{2, -4, 0, 0.5, 4}},
		{name: "whole history",
			p: Params{RepetitionPenalty: 2, RepeatLastN: -1}, history: []int32{4, 0, 3, 1},
			want: []float32{1, -4, 0, 0.5, 2}},
		{name: "penalty below 1 favours repeats",
			p: Params{RepetitionPenalty: 0.5}, history: []int32{0, 1},
			want: []float32{4, -1, 0, 1, 4}},
		{name: "out-of-vocabulary ids ignored",
			p: Params{RepetitionPenalty: 2}, history: []int32{-1, 5, 99},
			want: base},
		{name: "finite stays finite",
			p: Params{RepetitionPenalty: tiny}, history: []int32{4, 1},
			want: []float32{2, -2 * tiny, 0, 1, math.MaxFloat32}},
		{name: "penalty 1 is off",
			p: Params{RepetitionPenalty: 1}, history: []int32{0, 1, 4},
			want: base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, tt.p)
			got, _ := s.prepare(base, tt.history)
			if !slices.Equal(got, tt.want) {
				t.Errorf("penalised logits = %v, want %v", got, tt.want)
			}
			// A second step must start from the caller's logits again and
			// must not see the previous step's marks.
			got, _ = s.prepare(base, nil)
			if !slices.Equal(got, base) {
				t.Errorf("second step without history = %v, want %v", got, base)
			}
		})
	}
}

func TestPenaltyChangesGreedyChoice(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Params{RepetitionPenalty: 1.5})
	logits := []float32{3, 2.5, 0}
	if got := s.Sample(logits, nil, 0).ID; got != 0 {
		t.Fatalf("without history got %d, want 0", got)
	}
	if got := s.Sample(logits, []int32{0}, 0).ID; got != 1 {
		t.Errorf("with token 0 in history got %d, want 1 (3/1.5 < 2.5)", got)
	}
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	logits := randomLogits(7, 500, 1)
	run := func(seed uint64) []int32 {
		s := mustNew(t, Params{Temperature: 1, TopP: 0.95, Seed: seed})
		out := make([]int32, 200)
		for i := range out {
			out[i] = s.Sample(logits, out[:i], 0).ID
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Error("same seed gave different sequences")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same 200-token sequence")
	}
}

func TestTopK1IsGreedy(t *testing.T) {
	t.Parallel()
	greedy := mustNew(t, Params{})
	for seed := range uint64(50) {
		logits := randomLogits(seed, 300, 2)
		if seed%5 == 0 { // force a tie for the maximum
			i := argmax(logits)
			logits[(int(i)+17)%len(logits)] = logits[i]
		}
		s := mustNew(t, Params{Temperature: 1.5, TopK: 1, Seed: seed})
		want := greedy.Sample(logits, nil, 0).ID
		for range 5 {
			if got := s.Sample(logits, nil, 0).ID; got != want {
				t.Fatalf("logits seed %d: top_k=1 gave %d, greedy %d", seed, got, want)
			}
		}
	}
}

// TestTruncationSets checks which tokens survive on a distribution with
// probabilities 0.5, 0.25, 0.15, 0.1 (ids 0..3), boundaries kept away from
// rounding.
func TestTruncationSets(t *testing.T) {
	t.Parallel()
	logits := logs(0.15, 0.5, 0.1, 0.25) // shuffled: ranks are 1, 3, 0, 2
	tests := []struct {
		name string
		p    Params
		want []int32
	}{
		{name: "no truncation", p: Params{Temperature: 1}, want: []int32{0, 1, 2, 3}},
		{name: "top_k 2", p: Params{Temperature: 1, TopK: 2}, want: []int32{1, 3}},
		{name: "top_k above vocabulary", p: Params{Temperature: 1, TopK: 10}, want: []int32{0, 1, 2, 3}},
		{name: "top_p 0.4 keeps the best", p: Params{Temperature: 1, TopP: 0.4}, want: []int32{1}},
		{name: "top_p 0.7", p: Params{Temperature: 1, TopP: 0.7}, want: []int32{1, 3}},
		{name: "top_p 0.8", p: Params{Temperature: 1, TopP: 0.8}, want: []int32{1, 3, 0}},
		{name: "top_p 0.95", p: Params{Temperature: 1, TopP: 0.95}, want: []int32{1, 3, 0, 2}},
		{name: "min_p 0.4 (threshold 0.2)", p: Params{Temperature: 1, MinP: 0.4}, want: []int32{1, 3}},
		{name: "min_p 0.25 (threshold 0.125)", p: Params{Temperature: 1, MinP: 0.25}, want: []int32{0, 1, 3}},
		{name: "min_p 0.9", p: Params{Temperature: 1, MinP: 0.9}, want: []int32{1}},
		{name: "top_p after top_k renormalises", p: Params{Temperature: 1, TopK: 2, TopP: 0.6}, want: []int32{1}},
		{name: "min_p after top_p", p: Params{Temperature: 1, TopP: 0.95, MinP: 0.25}, want: []int32{1, 3, 0}},
		// At temperature 2 the probabilities become ∝ sqrt(p):
		// 0.370, 0.262, 0.203, 0.166.
		{name: "temperature before top_p", p: Params{Temperature: 2, TopP: 0.5}, want: []int32{1, 3}},
		{name: "temperature before min_p", p: Params{Temperature: 2, MinP: 0.5}, want: []int32{0, 1, 3}},
		{name: "low temperature sharpens", p: Params{Temperature: 0.25, TopP: 0.9}, want: []int32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, tt.p)
			cands, _ := s.truncate(s.prepare(logits, nil))
			got := slices.Clone(cands)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("survivors = %v, want %v", got, want)
			}
		})
	}
}

// referenceSurvivors truncates by sorting the whole vocabulary, the obvious
// way, for comparison with the heap-based version.
func referenceSurvivors(x []float32, p Params) []int32 {
	ids := make([]int32, len(x))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := cmp.Compare(x[b], x[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if p.TopK > 0 && p.TopK < len(ids) {
		ids = ids[:p.TopK]
	}
	w := make([]float64, len(ids))
	var sum float64
	for i, id := range ids {
		w[i] = math.Exp(float64(x[id]-x[ids[0]]) / float64(p.Temperature))
		sum += w[i]
	}
	if p.TopP < 1 {
		var cum float64
		for i := range ids {
			cum += w[i]
			if cum >= float64(p.TopP)*sum {
				ids, w = ids[:i+1], w[:i+1]
				break
			}
		}
	}
	n := 0
	for i := range ids {
		if w[i] >= float64(p.MinP) {
			n = i + 1
		}
	}
	return ids[:n]
}

func TestTruncationMatchesFullSort(t *testing.T) {
	t.Parallel()
	params := []Params{
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, TopP: 0.999}, // nucleus far beyond the first round
		{Temperature: 0.7, TopK: 40},  // top-k only
		{Temperature: 1.3, TopK: 500, TopP: 0.8, MinP: 0.01},
		{Temperature: 1, MinP: 0.05}, // min-p on unsorted candidates
		{Temperature: 2, TopP: 0.5, MinP: 0.2},
	}
	for pi, p := range params {
		for seed := range uint64(4) {
			x := randomLogits(seed, 5000, 1+float64(seed))
			s := mustNew(t, p)
			cands, _ := s.truncate(s.prepare(x, nil))
			got := slices.Clone(cands)
			want := referenceSurvivors(x, s.Params())
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("params %d seed %d: %d survivors, reference %d", pi, seed, len(got), len(want))
			}
		}
	}
}

func TestSelectTop(t *testing.T) {
	t.Parallel()
	x := []float32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	tests := []struct {
		k    int
		want []int32
	}{
		{k: 0, want: []int32{}},
		{k: 1, want: []int32{5}},
		{k: 4, want: []int32{5, 7, 4, 8}},
		{k: 6, want: []int32{5, 7, 4, 8, 10, 2}},
		{k: 11, want: []int32{5, 7, 4, 8, 10, 2, 0, 9, 6, 1, 3}},
	}
	for _, tt := range tests {
		ids := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		selectTop(ids, x, tt.k)
		if !slices.Equal(ids[:tt.k], tt.want) {
			t.Errorf("k=%d: top = %v, want %v", tt.k, ids[:tt.k], tt.want)
		}
		rest := slices.Sorted(slices.Values(ids))
		if !slices.Equal(rest, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Errorf("k=%d: ids no longer a permutation: %v", tt.k, ids)
		}
	}
}

// TestFrequencies draws many times from a 3-token distribution and checks
// the counts. The seed is fixed, so the outcome is too; the bounds are about
// six standard deviations wide.
func TestFrequencies(t *testing.T) {
	t.Parallel()
	want := []float64{0.2, 0.3, 0.5}
	tests := []struct {
		name string
		p    Params
	}{
		{name: "plain", p: Params{Temperature: 1, Seed: 1}},
		{name: "through the sorted top_p path", p: Params{Temperature: 1, TopP: 0.9999, Seed: 2}},
		{name: "through top_k", p: Params{Temperature: 1, TopK: 3, Seed: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, tt.p)
			logits := logs(want...)
			const draws = 30000
			var counts [3]int
			for range draws {
				counts[s.Sample(logits, nil, 0).ID]++
			}
			for i, p := range want {
				got := float64(counts[i]) / draws
				if math.Abs(got-p) > 0.018 {
					t.Errorf("token %d frequency %.4f, want %.2f ± 0.018", i, got, p)
				}
			}
		})
	}
}

// TestFrequenciesAcrossBlocks draws from a vocabulary of 1,000 tokens
// whose weight lies on three of them, in the first, second and fourth of
// draw's blocks (the third has none, and masked tokens surround them):
// the counts follow the weights, and no masked token is drawn.
func TestFrequenciesAcrossBlocks(t *testing.T) {
	t.Parallel()
	ids := []int32{100, 300, 900}
	want := []float64{0.2, 0.3, 0.5}
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Inf(-1))
	}
	for i, id := range ids {
		logits[id] = float32(math.Log(want[i]))
	}
	for _, p := range []Params{{Temperature: 1, Seed: 7}, {Temperature: 0.5, MinP: 0.01, Seed: 8}} {
		s := mustNew(t, p)
		const draws = 30000
		counts := map[int32]int{}
		for range draws {
			counts[s.Sample(logits, nil, 0).ID]++
		}
		// At temperature 0.5 the weights are the squares: 0.04, 0.09, 0.25.
		sq := 0.0
		for _, w := range want {
			sq += w * w
		}
		for i, id := range ids {
			w := want[i]
			if p.Temperature == 0.5 {
				w = w * w / sq
			}
			if got := float64(counts[id]) / draws; math.Abs(got-w) > 0.018 {
				t.Errorf("temperature %v: token %d frequency %.4f, want %.3f ± 0.018", p.Temperature, id, got, w)
			}
			delete(counts, id)
		}
		if len(counts) > 0 {
			t.Errorf("temperature %v: masked tokens drawn: %v", p.Temperature, counts)
		}
	}
}

// TestTopOfMatchesSelectTop: topOf over a whole vocabulary picks what
// selectTop picks over its ids listed in order, ties (many, values drawn
// from a few) broken the same way.
func TestTopOfMatchesSelectTop(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 7, 300, 5000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.IntN(12))
		}
		for _, k := range []int{1, 2, 5, 40, 64, n} {
			k = min(k, n)
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(i)
			}
			selectTop(ids, x, k)
			got := make([]int32, k)
			topOf(got, x)
			if !slices.Equal(got, ids[:k]) {
				t.Errorf("n %d, k %d: topOf %v, selectTop %v", n, k, got[:min(k, 8)], ids[:min(k, 8)])
			}
		}
	}
}

func TestTemperatureFrequencies(t *testing.T) {
	t.Parallel()
	// With logits ln 1 and ln 4 and temperature 2 the odds become 1:2.
	s := mustNew(t, Params{Temperature: 2, Seed: 5})
	logits := logs(1, 4)
	const draws = 30000
	n := 0
	for range draws {
		if s.Sample(logits, nil, 0).ID == 1 {
			n++
		}
	}
	if got := float64(n) / draws; math.Abs(got-2.0/3) > 0.02 {
		t.Errorf("token 1 frequency %.4f, want 0.667 ± 0.02", got)
	}
}

func TestLogprobs(t *testing.T) {
	t.Parallel()
	logits := randomLogits(11, 1000, 3)
	history := []int32{1, 2, 3, 500}
	tests := []struct {
		name string
		p    Params
	}{
		{name: "greedy", p: Params{RepetitionPenalty: 1.3}},
		{name: "hot and truncated", p: Params{Temperature: 1.8, TopK: 5, RepetitionPenalty: 1.3, Seed: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustNew(t, tt.p)
			c := s.Sample(logits, history, len(logits)+10)
			if len(c.Top) != len(logits) {
				t.Fatalf("len(Top) = %d, want %d (capped at vocabulary)", len(c.Top), len(logits))
			}
			var sum float64
			for i, tl := range c.Top {
				sum += math.Exp(float64(tl.Logprob))
				if i > 0 && tl.Logprob > c.Top[i-1].Logprob {
					t.Fatalf("Top not in descending order at %d", i)
				}
				if tl.ID == c.ID && tl.Logprob != c.Logprob {
					t.Errorf("Top has %v for the chosen token, Choice.Logprob %v", tl.Logprob, c.Logprob)
				}
			}
			if math.Abs(sum-1) > 1e-4 {
				t.Errorf("probabilities of all tokens sum to %v, want 1", sum)
			}
			if d := math.Abs(float64(c.Prob) - math.Exp(float64(c.Logprob))); d > 1e-6 {
				t.Errorf("Prob %v is not exp(Logprob %v)", c.Prob, c.Logprob)
			}
			// The reported distribution ignores temperature and truncation
			// but includes the penalty.
			x := slices.Clone(logits)
			for _, id := range history {
				if x[id] > 0 {
					x[id] /= 1.3
				} else {
					x[id] *= 1.3
				}
			}
			var z float64
			for _, v := range x {
				z += math.Exp(float64(v))
			}
			want := float64(x[c.ID]) - math.Log(z)
			if math.Abs(float64(c.Logprob)-want) > 1e-4 {
				t.Errorf("Logprob = %v, want log-softmax of penalised logits %v", c.Logprob, want)
			}
			if c.Top[0].ID != argmax(x) {
				t.Errorf("Top[0] = %d, want the penalised arg max %d", c.Top[0].ID, argmax(x))
			}
		})
	}
}

func TestTopLogprobsCount(t *testing.T) {
	t.Parallel()
	s := mustNew(t, Params{})
	logits := []float32{1, 3, 3, 2}
	tests := []struct {
		k    int
		want []int32
	}{
		{k: 0, want: nil},
		{k: -1, want: nil},
		{k: 2, want: []int32{1, 2}},
		{k: 3, want: []int32{1, 2, 3}},
	}
	for _, tt := range tests {
		c := s.Sample(logits, nil, tt.k)
		var got []int32
		for _, tl := range c.Top {
			got = append(got, tl.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("topLogprobs=%d: ids %v, want %v", tt.k, got, tt.want)
		}
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	logits := randomLogits(1, 4096, 2)
	history := []int32{1, 2, 3, 4, 5}
	tests := []struct {
		name string
		p    Params
	}{
		{name: "greedy", p: Params{RepetitionPenalty: 1.1}},
		{name: "sampling", p: Params{Temperature: 0.8, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1}},
		{name: "nucleus without top_k", p: Params{Temperature: 1, TopP: 0.99}},
	}
	for _, tt := range tests {
		s := mustNew(t, tt.p)
		s.Sample(logits, history, 0) // sizes the buffers
		if n := testing.AllocsPerRun(50, func() { s.Sample(logits, history, 0) }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
		}
	}
}

func TestSamplePanicsOnEmptyLogits(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Sample(nil) did not panic")
		}
	}()
	mustNew(t, Params{}).Sample(nil, nil, 0)
}

// BenchmarkSample samples one row of logits, at the vocabulary sizes of
// Llama 2 (32,000: the TinyStories and 134M benchmark models) and Qwen2
// (151,936).
func BenchmarkSample(b *testing.B) {
	for _, vocab := range []int{32000, 151936} {
		logits := randomLogits(3, vocab, 3)
		history := make([]int32, 256)
		for i := range history {
			history[i] = int32(i * 97 % vocab)
		}
		// A confident model's row: twenty tokens well above the rest, as
		// where top-p's nucleus is a few tokens.
		peaked := slices.Clone(logits)
		for i := range 20 {
			peaked[i*7919%vocab] += 12
		}
		for _, bc := range []struct {
			name   string
			p      Params
			top    int
			peaked bool
		}{
			{"greedy", Params{RepetitionPenalty: 1.1}, 0, false},
			{"top_k40_top_p0.9", Params{Temperature: 0.7, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.1}, 0, false},
			{"top_p0.9_only", Params{Temperature: 0.7, TopP: 0.9}, 0, false},
			{"temperature1", Params{Temperature: 1}, 0, false},
			{"greedy_top_logprobs5", Params{}, 5, false},
			{"top_p0.9_peaked", Params{Temperature: 0.7, TopP: 0.9}, 0, true},
		} {
			b.Run(fmt.Sprintf("vocab%d/%s", vocab, bc.name), func(b *testing.B) {
				s := mustNew(b, bc.p)
				row := logits
				if bc.peaked {
					row = peaked
				}
				for b.Loop() {
					s.Sample(row, history, bc.top)
				}
			})
		}
	}
}

// TestTopLeavesOutMaskedTokens: alternatives of probability 0 (a constraint
// masked them to -Inf) are not listed, so no logprob is -Inf and the list
// may be shorter than asked.
func TestTopLeavesOutMaskedTokens(t *testing.T) {
	t.Parallel()
	inf := float32(math.Inf(1))
	s := mustNew(t, Params{})
	c := s.Sample([]float32{-inf, 1, -inf, 0.5, -inf}, nil, 4)
	if len(c.Top) != 2 || c.Top[0].ID != 1 || c.Top[1].ID != 3 {
		t.Fatalf("Top = %+v, want tokens 1 and 3 only", c.Top)
	}
	for _, e := range c.Top {
		if math.IsInf(float64(e.Logprob), 0) || e.Logprob != e.Logprob {
			t.Errorf("Top logprob %v is not finite", e.Logprob)
		}
	}
}

// TestLogprobsIndependentOfTemperature: logprobs are of the untempered
// distribution, so the top alternatives' logprobs are the same bits at
// every temperature (at 1 the log-sum-exp reuses the weights' sum; at
// others it must not).
func TestLogprobsIndependentOfTemperature(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		logits := randomLogits(seed, 3000, 2)
		want := mustNew(t, Params{}).Sample(logits, nil, 5).Top
		for _, temp := range []float32{1, 0.7, 1.3} {
			got := mustNew(t, Params{Temperature: temp, Seed: seed}).Sample(logits, nil, 5).Top
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, temperature %v: top logprobs %v, greedy's %v", seed, temp, got, want)
			}
		}
	}
}
