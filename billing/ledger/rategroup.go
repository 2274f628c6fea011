package ledger

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// rateGroupMax caps the records one rating transaction takes (a single
// call with more is taken alone).
const rateGroupMax = 1000

// rateGroup lets the rating jobs that one River client runs at once share
// one transaction, as Postgres group commit shares a WAL flush: each job's
// Work call queues its records; the first call to find nobody leading
// leads, taking the queued calls in arrival order, up to rateGroupMax
// records at a time, and rating each lot with one call of rate, until its
// own records are rated; then it hands the lead to the first call still
// queued and returns. The others wait for their lot's result. Each River
// job still ends on its own records' results, so a record that cannot be
// rated fails alone. One rating transaction at a time per client also
// keeps the client's ratings from queueing behind one another on the
// rollup jobs they insert (unique per tenant and day: a second insert
// waits for the first's transaction).
type rateGroup struct {
	mu      sync.Mutex
	queue   []*rateCall
	leading bool
}

// rateLotFunc rates a lot of records, returning each record's error, or
// the error of the whole lot (its transaction failed).
type rateLotFunc func(ctx context.Context, jobs []JobRef) ([]error, error)

// rateCall is one Work call waiting in a rateGroup.
type rateCall struct {
	jobs []JobRef
	// wake tells the call its records were rated, or that it leads now.
	wake chan struct{}
	done bool
	errs []error
	err  error
}

// do rates jobs with the records queued beside them and returns each one's
// error, or the error of their lot. If ctx ends while they wait, do
// returns ctx.Err(); they may be rated anyway (rating is idempotent).
func (g *rateGroup) do(ctx context.Context, jobs []JobRef, rate rateLotFunc) ([]error, error) {
	c := &rateCall{jobs: jobs, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queue = append(g.queue, c)
	for g.leading && !c.done {
		g.mu.Unlock()
		select {
		case <-c.wake:
			g.mu.Lock()
		case <-ctx.Done():
			g.mu.Lock()
			if !c.done {
				g.leave(c)
				return nil, ctx.Err()
			}
		}
	}
	if c.done {
		return c.errs, c.err
	}
	g.leading = true
	for !c.done {
		if ctx.Err() != nil {
			g.leading = false
			g.leave(c)
			return nil, ctx.Err()
		}
		n, size := 1, len(g.queue[0].jobs)
		for n < len(g.queue) && size+len(g.queue[n].jobs) <= rateGroupMax {
			size += len(g.queue[n].jobs)
			n++
		}
		lot := slices.Clone(g.queue[:n])
		g.queue = slices.Delete(g.queue, 0, n)
		g.mu.Unlock()
		rateLot(ctx, lot, rate)
		g.mu.Lock()
		for _, l := range lot {
			l.done = true
			l.signal()
		}
	}
	g.leading = false
	if len(g.queue) > 0 {
		g.queue[0].signal() // the next leader
	}
	return c.errs, c.err
}

// leave takes c, which gives up waiting, out of the queue, and when nobody
// leads, wakes the next call to lead. g.mu is held.
func (g *rateGroup) leave(c *rateCall) {
	if i := slices.Index(g.queue, c); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	if !g.leading && len(g.queue) > 0 {
		g.queue[0].signal()
	}
}

// signal wakes c's Work call; a call already woken needs no second word
// (it looks at the group's state under the lock once awake).
func (c *rateCall) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// rateLot rates lot's records with one call of rate and hands each call
// its results. A panic becomes every call's error (River would recover it
// in the leader's job only, and the others would wait for ever).
func rateLot(ctx context.Context, lot []*rateCall, rate rateLotFunc) {
	var errs []error
	var err error
	defer func() {
		if p := recover(); p != nil {
			errs, err = nil, fmt.Errorf("billing: rating panicked: %v", p)
		}
		for _, l := range lot {
			if l.err = err; err == nil {
				l.errs, errs = errs[:len(l.jobs):len(l.jobs)], errs[len(l.jobs):]
			}
		}
	}()
	var jobs []JobRef
	for _, l := range lot {
		jobs = append(jobs, l.jobs...)
	}
	errs, err = rate(ctx, jobs)
}
