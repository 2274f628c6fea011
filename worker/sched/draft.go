package sched

import (
	"slices"
	"time"
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

// drafter is one sequence's drafting state.
type drafter struct {
	limit int // the longest draft it proposes now
	// drafted and accepted count the tokens of the current window.
	drafted, accepted int
	cool              int // decode steps left without drafts
	backoff           int // the next cool-down
	buf               []int32
}

func newDrafter() *drafter {
	return &drafter{limit: draftStart, backoff: coolSteps}
}

// propose returns a draft of at most max tokens continuing toks, or nil.
// The slice is reused by the next call.
func (d *drafter) propose(toks []int32, max int) []int32 {
	if d.cool > 0 {
		d.cool--
		return nil
	}
	max = min(max, d.limit)
	if max <= 0 {
		return nil
	}
	d.buf = lookup(toks, max, d.buf[:0])
	return d.buf
}

// verified records that a draft of n tokens had its first a accepted.
func (d *drafter) verified(n, a int, maxDraft int) {
	if n == 0 {
		return
	}
	if a == n {
		d.limit = min(maxDraft, d.limit+2)
	} else {
		d.limit = max(1, a+1)
	}
	d.drafted += n
	d.accepted += a
	if d.drafted < draftWindow {
		return
	}
	if float64(d.accepted) < draftPays*float64(d.drafted) {
		d.cool = d.backoff
		d.backoff = min(maxCool, 2*d.backoff)
		d.limit = draftStart
	} else {
		d.backoff = coolSteps
	}
	d.drafted, d.accepted = 0, 0
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
		d := q.dr.propose(toks, room)
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

// draftContext is the metrics' label of drafts from the job's context.
const draftContext = "context"

// noteDraft counts a verified draft of n tokens with a accepted.
func (s *Scheduler) noteDraft(n, a int) {
	s.drafted.Add(int64(n))
	s.accepted.Add(int64(a))
	if m := s.cfg.Metrics; m != nil {
		m.drafted.WithLabelValues(draftContext).Add(float64(n))
		m.draftAccepted.WithLabelValues(draftContext).Add(float64(a))
	}
}
