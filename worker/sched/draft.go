package sched

import (
	"slices"
	"time"

	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// Drafts: tokens proposed for a decoding sequence without a draft model,
// fed in the same forward pass as its pending token and verified there.
//
// A decoding sequence's row normally feeds one token, its last, and
// samples the next. With a draft d₁…d_k it feeds the last token and the
// draft at the next k positions and gets the logits of all k+1 rows. Row 0
// is sampled as always; while the token sampled at row j equals d_{j+1},
// row j+1's logits are the ones decoding without the draft would have
// computed (the kernels give a row the same bits in any batch), so it is
// sampled too, with the same mask, penalties and random stream as it
// would have been. The first token that differs from the draft is kept
// and ends the row, and the K and V written for the rest of the draft lie
// past the sequence's computed positions, to be overwritten. Sampling
// every verified row as usual and keeping the tokens up to the first
// mismatch emits exactly what decoding without drafts emits, token for
// token, greedy or seeded (a point-mass draft accepted when the sample
// equals it is the speculative acceptance rule for a deterministic
// proposal): a draft changes how many forward passes a job takes, never
// its output.
//
// Drafts come from two sources. The constraints: the bytes a JSON
// schema or a regex forces next (tools.Run.Forced: keys, punctuation, the
// rest of an enum value), tokenized as a continuation. The context
// (prompt lookup): the longest n-gram (maxNgram down to minNgram tokens)
// that ends the sequence and occurred before proposes the tokens that
// followed its latest occurrence, which is what copying from a document
// or repeating a key looks like.
//
// What a draft costs is the step's rows: on hardware where a decode step
// reads the weights once for all its rows (a GPU, a wide CPU core on a
// large model) a few more rows cost little, while where the arithmetic
// already bounds the step (a small core), a row costs about what a token
// does. So a draft is as long as it pays, from the pacer's fitted step
// time and each source's measured acceptance: the i-th draft token is
// emitted with probability α^i (α the source's per-token acceptance)
// and costs perToken more step time, while the step emits B tokens in
// time t without it; it pays while α^i > perToken·B/t. A source whose
// drafts do not pay is still tried with a short draft once in a while,
// so that its acceptance stays measured. Drafts take only the step's
// prefill budget that the prompts left, and only KV blocks nobody else
// needs: drafting never preempts.

const (
	maxNgram = 4
	minNgram = 2
	// alphaDecay is the weight an observation of acceptance loses per
	// verified draft: the estimate follows the last dozen or so drafts.
	alphaDecay = 0.9
	// probeEvery is the decode steps after which a source whose drafts
	// do not pay drafts probeLen tokens anyway: at most one row in 64
	// more where drafts never pay.
	probeEvery = 64
	probeLen   = 1
	// payFloor is the threshold when the step time is not fitted yet.
	payFloor = 0.5
)

// Draft sources.
const (
	srcGrammar = iota // the text the job's constraints force next
	srcContext        // n-grams of the job's prompt and output
	numSources
)

// sourceNames are the metrics' labels of the sources.
var sourceNames = [numSources]string{"grammar", "context"}

// priors are each source's acceptance before any draft is verified, as
// (accepted, trials): forced text is usually the model's choice too.
var priors = [numSources][2]float64{{8, 10}, {2, 4}}

// maxForced bounds the forced text a grammar draft tokenizes, in bytes.
const maxForced = 64

// drafter is one sequence's drafting state, per source.
type drafter struct {
	src [numSources]struct {
		// succ and trials count, decayed, the draft tokens accepted and
		// the tokens tried (every accepted one, and the first rejected).
		succ, trials float64
		idle         int // decode steps since its last draft
	}
	last int // the source of the draft being verified
	buf  []int32
}

func newDrafter() *drafter {
	d := &drafter{}
	for i := range d.src {
		d.src[i].succ, d.src[i].trials = priors[i][0], priors[i][1]
	}
	return d
}

// alpha is source i's estimated per-token acceptance.
func (d *drafter) alpha(i int) float64 {
	s := &d.src[i]
	return (s.succ + 1) / (s.trials + 2)
}

// length is how many tokens of source i pay at threshold theta, at most
// max: the most i with α^i > theta, or probeLen when none does and the
// source has not drafted for probeEvery steps.
func (d *drafter) length(i int, theta float64, max int) int {
	a, p, n := d.alpha(i), 1.0, 0
	for n < max {
		if p *= a; p <= theta {
			break
		}
		n++
	}
	if n == 0 && d.src[i].idle >= probeEvery {
		n = min(probeLen, max)
	}
	return n
}

// propose returns a draft of at most max tokens continuing q's tokens,
// or nil: the text q's constraints force next, tokenized, else a lookup
// in q's context; each as long as it pays at theta (see length). The
// slice is reused by the next call.
func (d *drafter) propose(q *seq, tok *tokenizer.Tokenizer, max int, theta float64) []int32 {
	for i := range d.src {
		d.src[i].idle++
	}
	if max <= 0 {
		return nil
	}
	if n := d.length(srcGrammar, theta, max); n > 0 && q.g.HasTools() {
		if f := q.g.Forced(maxForced); len(f) > 0 {
			ids := tok.Encode(string(f), tokenizer.EncodeOptions{Continues: true})
			d.last, d.buf = srcGrammar, append(d.buf[:0], ids[:min(len(ids), n)]...)
			return d.buf
		}
	}
	if n := d.length(srcContext, theta, max); n > 0 {
		d.last, d.buf = srcContext, lookup(q.g.Tokens(), n, d.buf[:0])
		return d.buf
	}
	return nil
}

// verified records that the last draft, of n tokens, had its first a
// accepted.
func (d *drafter) verified(n, a int) {
	if n == 0 {
		return
	}
	s := &d.src[d.last]
	s.idle = 0
	tried := a
	if a < n {
		tried++
	}
	s.succ = alphaDecay*s.succ + float64(a)
	s.trials = alphaDecay*s.trials + float64(tried)
}

// lookup appends to dst up to max tokens that followed the latest earlier
// occurrence of the longest n-gram (maxNgram down to minNgram tokens)
// ending toks.
func lookup(toks []int32, max int, dst []int32) []int32 {
	L := len(toks)
	for n := min(maxNgram, L-1); n >= minNgram; n-- {
		suffix := toks[L-n:]
		last := suffix[n-1]
		// The latest occurrence ending before the suffix itself: its end
		// e (exclusive) is at most L−1, so that a token follows it.
		for e := L - 1; e >= n; e-- {
			if toks[e-1] != last || !slices.Equal(toks[e-n:e], suffix) {
				continue
			}
			end := min(L, e+max)
			return append(dst, toks[e:end]...)
		}
	}
	return dst
}

// addDrafts gives plan's decoding rows drafts to verify, from budget
// (the prefill tokens the step's prompts left) and the blocks no one else
// needs: the free blocks not promised to prompts or reservations, less
// one for each running sequence's next block. A reserved job drafts only
// within the blocks it holds (its reservation is for its own tokens, in
// order). Drafting never preempts.
func (s *Scheduler) addDrafts(plan []stepRow, budget int, now time.Time) {
	if s.cfg.NoDrafts || budget <= 0 {
		return
	}
	spare := -1   // computed at the first draft that needs it
	theta := -1.0 // computed at the first row that may draft
	for i := range plan {
		r := &plan[i]
		q := r.q
		if budget <= 0 {
			return
		}
		toks := q.g.Tokens()
		if q.dr == nil || r.n != 1 || !r.samples || len(toks)-q.computed != 1 || q.g.Done() {
			continue
		}
		// Tokens past the job's last one or the context are never needed.
		room := min(q.g.MaxNew()-len(q.g.Result().OutputIDs)-1, s.m.Context-1-len(toks), s.cfg.MaxDraft, budget)
		if q.maxBlocks > 0 {
			room = min(room, s.fits(q, 1+room, q.maxBlocks)-1)
		}
		if theta < 0 {
			theta = s.draftThreshold(plan)
		}
		d := q.dr.propose(q, s.tok, room, theta)
		if len(d) == 0 {
			continue
		}
		n := 1 + len(d)
		if need := s.needPages(q.computed, q.computed+n); need > q.held {
			blocks := q.held
			if !q.reserved {
				if spare < 0 {
					spare = max(0, s.bm.available()-s.committed()-len(s.running))
				}
				blocks += spare
			}
			n = max(1, s.fits(q, n, blocks))
			if n > 1 {
				before := q.held
				if !s.grow(q, q.computed+n, now) {
					panic("sched: a draft's blocks were not spare") // grow preempts only when short
				}
				spare -= q.held - before
			}
		}
		if n == 1 {
			continue
		}
		r.n, r.draft = n, d[:n-1]
		budget -= n - 1
	}
}

// draftThreshold is the acceptance probability above which a draft token
// pays in the step plan (drafter.length): the time one more row adds
// over the time per token the step emits without drafts.
func (s *Scheduler) draftThreshold(plan []stepRow) float64 {
	if s.cfg.DraftThreshold > 0 {
		return s.cfg.DraftThreshold
	}
	m, ok := s.pace.model()
	if !ok {
		return payFloor
	}
	var decodes, at int
	for _, r := range plan {
		if r.samples {
			decodes++
			at += r.q.computed
		}
	}
	w := planShape(plan)
	t := m.time(float64(w.tokens), float64(w.attended))
	if t <= 0 || decodes == 0 {
		return payFloor
	}
	// A row more costs its matrix products and its attention, at about
	// the decoding rows' mean position.
	row := m.perToken + m.perAttn*float64(at)/float64(decodes)
	return min(1, row*float64(decodes)/t)
}

// noteDraft counts a verified draft of source src, n tokens with a
// accepted.
func (s *Scheduler) noteDraft(src, n, a int) {
	if m := s.cfg.Metrics; m != nil {
		m.draftedBy[src].Add(float64(n))
		m.acceptedBy[src].Add(float64(a))
	}
}
