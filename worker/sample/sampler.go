package sample

import (
	"math"
	"math/rand/v2"

	"github.com/zerolayer/zerolayer/gpu/cpu/vec"
)

// pcgStream is the PCG stream constant; the seed fills the state.
const pcgStream = 0x9e3779b97f4a7c15

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	// ID is the token id.
	ID int32
	// Logprob is the natural log of the token's probability under the
	// penalised, untempered distribution.
	Logprob float32
}

// Choice is the outcome of one sampling step.
type Choice struct {
	// ID is the chosen token.
	ID int32
	// Logprob is the chosen token's log-probability: the log-softmax of the
	// logits after the repetition penalty, before temperature and
	// truncation.
	Logprob float32
	// Prob is exp(Logprob).
	Prob float32
	// Top holds the most likely tokens under the same distribution, most
	// likely first (ties: lowest id first), when asked for; nil otherwise.
	// The chosen ID need not be among them. Tokens of probability 0 (a
	// -Inf logit: masked by a constraint) are left out, so Top may be
	// shorter than asked and every Logprob in it is finite.
	Top []TokenLogprob
}

// Sampler chooses tokens from logits according to Params. It keeps its
// random generator and scratch buffers between calls, so one Sampler serves
// one generation; it is not safe for concurrent use.
type Sampler struct {
	p   Params
	rng *rand.Rand

	x     []float32 // penalised logits of the current step
	probs []float32 // unnormalised sampling weights, indexed by token id
	ids   []int32   // candidate token ids
	mark  []uint32  // mark[id] == epoch: id already penalised this step
	epoch uint32
}

// New returns a Sampler for p.WithDefaults(), or an error matching
// ErrInvalidParams that names the parameter out of range.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, pcgStream))}, nil
}

// Params returns the parameters the Sampler uses, defaults filled in.
func (s *Sampler) Params() Params { return s.p }

// Sample chooses the next token from logits, one per vocabulary entry.
// history is the sequence so far (prompt and generated tokens), used by the
// repetition penalty; ids outside the vocabulary are ignored. topLogprobs > 0
// fills Choice.Top with that many entries (at most len(logits)).
//
// Sample does not modify logits or history. NaN logits count as -Inf and
// +Inf as the largest float32; if every logit is -Inf all tokens are taken as
// equally likely. Sample panics if logits is empty.
func (s *Sampler) Sample(logits []float32, history []int32, topLogprobs int) Choice {
	if len(logits) == 0 {
		panic("sample: Sample called with no logits")
	}
	x, best := s.prepare(logits, history)

	id := best
	var all float64 // Σ e**(x−x[best]) over the vocabulary, once known
	if s.p.Temperature != 0 {
		var cands []int32
		cands, all = s.truncate(x, best)
		id = s.draw(cands)
		if s.p.Temperature != 1 {
			all = 0 // the weights' sum, not the softmax's
		}
	}
	if all == 0 { // at least 1 (the best token's term) once computed
		all = vec.SumExp(nil, x, x[best], 1)
	}
	lse := float64(x[best]) + math.Log(all)
	lp := float32(float64(x[id]) - lse)
	c := Choice{ID: id, Logprob: lp, Prob: float32(math.Exp(float64(lp)))}
	if topLogprobs > 0 {
		c.Top = s.top(x, lse, topLogprobs)
	}
	return c
}

// prepare copies logits into the scratch buffer, makes them finite or -Inf,
// and applies the repetition penalty. It returns the result and its arg max.
func (s *Sampler) prepare(logits []float32, history []int32) ([]float32, int32) {
	v := len(logits)
	if cap(s.x) < v {
		s.x = make([]float32, v)
		s.probs = make([]float32, v)
		s.ids = make([]int32, v)
	}
	x := s.x[:v]
	best, maxv := vec.Clean(x, logits)
	if math.IsInf(float64(maxv), -1) {
		clear(x)
	}

	pen := s.p.RepetitionPenalty
	if pen == 1 || len(history) == 0 {
		return x, int32(best)
	}
	window := history
	if n := s.p.RepeatLastN; n >= 0 && len(window) > n {
		window = window[len(window)-n:]
	}
	if len(s.mark) < v {
		s.mark = make([]uint32, v)
		s.epoch = 0
	}
	s.epoch++
	if s.epoch == 0 { // wrapped: stale marks could collide
		clear(s.mark)
		s.epoch = 1
	}
	for _, t := range window {
		if t < 0 || int(t) >= v || s.mark[t] == s.epoch {
			continue
		}
		s.mark[t] = s.epoch
		l := x[t]
		if l > 0 {
			l /= pen
		} else {
			l *= pen
		}
		// Keep finite logits finite: an infinity would turn the
		// softmax into NaN.
		if !math.IsInf(float64(x[t]), 0) {
			l = min(max(l, -math.MaxFloat32), math.MaxFloat32)
		}
		x[t] = l
	}
	return x, argmax(x)
}

// argmax returns the index of the largest value of x, which holds no NaN,
// the lowest on ties.
func argmax(x []float32) int32 { return int32(vec.ArgMax(x)) }

// firstRound is the size of the first sorted prefix top-p builds when top-k
// has not sorted the candidates already.
const firstRound = 64

// truncate applies temperature, top-k, top-p and min-p to x, whose arg max
// is best, and returns the surviving token ids, with their weights in
// s.probs. The ids alias s.ids. all is the sum of the weights of the whole
// vocabulary when top-k left it whole, else 0: at temperature 1 it is the
// log-sum-exp's sum, the same kernel on the same inputs.
func (s *Sampler) truncate(x []float32, best int32) (ids []int32, all float64) {
	ids = s.ids[:len(x)]
	for i := range ids {
		ids[i] = int32(i)
	}
	n, sorted := len(ids), 0 // ids[:sorted] is in descending order
	if k := s.p.TopK; k > 0 && k < n {
		selectTop(ids, x, k)
		n, sorted = k, k
	}

	// Weights relative to the best token, which gets exactly 1 and
	// survives every truncation.
	m := x[best]
	invT := 1 / s.p.Temperature
	var sum float64
	if n == len(x) { // every token, in id order
		sum = vec.SumExp(s.probs, x, m, invT)
		all = sum
	} else {
		for _, id := range ids[:n] {
			w := vec.ExpNeg((x[id] - m) * invT)
			s.probs[id] = w
			sum += float64(w)
		}
	}

	if s.p.TopP < 1 {
		target := float64(s.p.TopP) * sum
		var cum float64
		for i := 0; i < n; i++ {
			if i == sorted {
				k := min(max(firstRound, sorted), n-sorted)
				selectTop(ids[sorted:n], x, k)
				sorted += k
			}
			cum += float64(s.probs[ids[i]])
			if cum >= target {
				n = i + 1
				break
			}
		}
	}

	if minP := s.p.MinP; minP > 0 {
		// p/sum >= minP * 1/sum, so compare the raw weights with minP.
		if n <= sorted {
			for n > 1 && s.probs[ids[n-1]] < minP {
				n--
			}
		} else {
			j := 0
			for _, id := range ids[:n] {
				if s.probs[id] >= minP {
					ids[j] = id
					j++
				}
			}
			n = j
		}
	}
	return ids[:n], all
}

// draw picks one of cands with probability proportional to its weight.
func (s *Sampler) draw(cands []int32) int32 {
	var total float64
	for _, id := range cands {
		total += float64(s.probs[id])
	}
	r := s.rng.Float64() * total
	last := cands[0] // overwritten: the best candidate survives with weight 1
	for _, id := range cands {
		w := float64(s.probs[id])
		if w == 0 {
			continue
		}
		r -= w
		if r < 0 {
			return id
		}
		last = id
	}
	return last // rounding left r at or just above 0
}

// top returns the k most likely tokens of x with their log-probabilities.
func (s *Sampler) top(x []float32, lse float64, k int) []TokenLogprob {
	ids := s.ids[:len(x)]
	for i := range ids {
		ids[i] = int32(i)
	}
	k = min(k, len(ids))
	selectTop(ids, x, k)
	out := make([]TokenLogprob, 0, k)
	for _, id := range ids[:k] {
		lp := float32(float64(x[id]) - lse)
		if math.IsInf(float64(lp), -1) {
			break // most likely first: the rest are masked too
		}
		out = append(out, TokenLogprob{ID: id, Logprob: lp})
	}
	return out
}
