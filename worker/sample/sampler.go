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

	x      []float32 // penalised logits of the current step
	probs  []float32 // unnormalised sampling weights, indexed by token id
	ids    []int32   // candidate token ids
	blocks []float64 // draw's sums of the candidates' weights, a block each
	mark   []uint32  // mark[id] == epoch: id already penalised this step
	epoch  uint32
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
	// ids[:sorted] is in descending order. The other ids are written out
	// only when needed (listed): a whole vocabulary is 151,936 of them.
	n, sorted, listed := len(x), 0, false
	if k := s.p.TopK; k > 0 && k < n {
		topOf(ids[:k], x)
		n, sorted, listed = k, k, true
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
				switch {
				case listed:
					selectTop(ids[sorted:n], x, k)
				case sorted == 0: // the first round: the best of the vocabulary, no id listed
					topOf(ids[:k], x)
				default:
					// The first round fell short: list every id and take
					// the best again, the first round's the same, in the
					// same order.
					listIDs(ids)
					listed = true
					selectTop(ids, x, sorted+k)
				}
				sorted += k
			}
			cum += float64(s.probs[ids[i]])
			if cum >= target {
				n = i + 1
				break
			}
		}
	}
	if sorted == 0 { // nothing truncated: every id, in id order
		listIDs(ids)
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

// drawBlock is how many candidates draw weighs at a time: it sums the
// weights of each block, walks the blocks' sums and then one block's
// weights, so that a draw over a whole vocabulary is not one chain of
// dependent additions as long as the vocabulary (BenchmarkSample at
// 151,936 tokens, temperature 1: 304 µs a sample that way, 199 blocked).
const drawBlock = 256

// draw picks one of cands with probability proportional to its weight.
func (s *Sampler) draw(cands []int32) int32 {
	nb := (len(cands) + drawBlock - 1) / drawBlock
	if cap(s.blocks) < nb {
		s.blocks = make([]float64, nb)
	}
	sums := s.blocks[:nb]
	var total float64
	for b := range sums {
		sums[b] = weightSum(s.probs, cands[b*drawBlock:min((b+1)*drawBlock, len(cands))])
		total += sums[b]
	}
	r := s.rng.Float64() * total
	last := 0 // the last block of weight; the best candidate's has weight 1
	for b, w := range sums {
		if w == 0 {
			continue
		}
		last = b
		if r < w {
			break
		}
		r -= w // rounding may leave r at or just above 0 past the last block
	}
	block := cands[last*drawBlock : min((last+1)*drawBlock, len(cands))]
	id := block[0]
	for _, c := range block {
		w := float64(s.probs[c])
		if w == 0 {
			continue
		}
		id = c
		r -= w
		if r < 0 {
			break
		}
	}
	return id
}

// weightSum is the sum of probs over ids, added in float64 in four
// independent chains.
func weightSum(probs []float32, ids []int32) float64 {
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(ids); i += 4 {
		a += float64(probs[ids[i]])
		b += float64(probs[ids[i+1]])
		c += float64(probs[ids[i+2]])
		d += float64(probs[ids[i+3]])
	}
	for ; i < len(ids); i++ {
		a += float64(probs[ids[i]])
	}
	return a + b + c + d
}

// top returns the k most likely tokens of x with their log-probabilities.
func (s *Sampler) top(x []float32, lse float64, k int) []TokenLogprob {
	ids := s.ids[:min(k, len(x))]
	topOf(ids, x)
	out := make([]TokenLogprob, 0, len(ids))
	for _, id := range ids {
		lp := float32(float64(x[id]) - lse)
		if math.IsInf(float64(lp), -1) {
			break // most likely first: the rest are masked too
		}
		out = append(out, TokenLogprob{ID: id, Logprob: lp})
	}
	return out
}
