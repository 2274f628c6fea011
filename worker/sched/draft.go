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
// Drafts come from the sequence's own context (prompt lookup): the
// longest n-gram (maxNgram down to minNgram tokens) that ends the
// sequence and occurred before proposes the tokens that followed its
// latest occurrence, which is what copying from a document or repeating
// a key looks like. A draft's length adapts per sequence: it grows while
// drafts are accepted whole and shrinks to what was accepted otherwise;
// a sequence whose drafts are rarely accepted stops drafting for a while
// (longer each time), so a workload that does not copy pays almost
// nothing. Drafts take only the step's prefill budget that the prompts
// left, and only KV blocks nobody else needs: drafting never preempts.

const (
	maxNgram = 4
	minNgram = 2
	// draftStart is a sequence's first draft length.
	draftStart = 4
	// draftWindow is how many drafted tokens are judged at a time; a
	// window accepting less than draftPays of them turns drafting off
	// for coolSteps decode steps, doubled at each further failure up to
	// maxCool.
	draftWindow = 32
	draftPays   = 0.25
	coolSteps   = 16
	maxCool     = 1024
)

// Draft sources.
const (
	srcGrammar = iota // the text the job's constraints force next
	srcContext        // n-grams of the job's prompt and output
	numSources
)

// sourceNames are the metrics' labels of the sources.
var sourceNames = [numSources]string{"grammar", "context"}

// maxForced bounds the forced text a grammar draft tokenizes, in bytes.
const maxForced = 64

// drafter is one sequence's drafting state, per source.
type drafter struct {
	src [numSources]struct {
		limit int // the longest draft it proposes now
		// drafted and accepted count the tokens of the current window.
		drafted, accepted int
		cool              int // decode steps left without its drafts
		backoff           int // the next cool-down
	}
	last int // the source of the draft being verified
	buf  []int32
}

func newDrafter() *drafter {
	d := &drafter{}
	for i := range d.src {
		d.src[i].limit, d.src[i].backoff = draftStart, coolSteps
	}
	return d
}

// propose returns a draft of at most max tokens continuing q's tokens,
// or nil: the text q's constraints force next, tokenized, else a lookup
// in q's context. The slice is reused by the next call.
func (d *drafter) propose(q *seq, tok *tokenizer.Tokenizer, max int) []int32 {
	for i := range d.src {
		if d.src[i].cool > 0 {
			d.src[i].cool--
		}
	}
	if max <= 0 {
		return nil
	}
	if g := &d.src[srcGrammar]; g.cool == 0 && q.g.HasTools() {
		if f := q.g.Forced(maxForced); len(f) > 0 {
			ids := tok.Encode(string(f), tokenizer.EncodeOptions{Continues: true})
			d.last, d.buf = srcGrammar, append(d.buf[:0], ids[:min(len(ids), max, g.limit)]...)
			return d.buf
		}
	}
	if c := &d.src[srcContext]; c.cool == 0 {
		d.last, d.buf = srcContext, lookup(q.g.Tokens(), min(max, c.limit), d.buf[:0])
		return d.buf
	}
	return nil
}

// verified records that the last draft, of n tokens, had its first a
// accepted.
func (d *drafter) verified(n, a int, maxDraft int) {
	s := &d.src[d.last]
	if n == 0 {
		return
	}
	if a == n {
		s.limit = min(maxDraft, s.limit+2)
	} else {
		s.limit = max(1, a+1)
	}
	s.drafted += n
	s.accepted += a
	if s.drafted < draftWindow {
		return
	}
	if float64(s.accepted) < draftPays*float64(s.drafted) {
		s.cool = s.backoff
		s.backoff = min(maxCool, 2*s.backoff)
		s.limit = draftStart
	} else {
		s.backoff = coolSteps
	}
	s.drafted, s.accepted = 0, 0
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
	spare := -1 // computed at the first draft that needs it
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
		d := q.dr.propose(q, s.tok, room)
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

// noteDraft counts a verified draft of source src, n tokens with a
// accepted.
func (s *Scheduler) noteDraft(src, n, a int) {
	s.drafted.Add(int64(n))
	s.accepted.Add(int64(a))
	if m := s.cfg.Metrics; m != nil {
		m.drafted.WithLabelValues(sourceNames[src]).Add(float64(n))
		m.draftAccepted.WithLabelValues(sourceNames[src]).Add(float64(a))
	}
}
