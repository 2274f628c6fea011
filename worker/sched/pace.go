package sched

import (
	"math"
	"time"
)

// pacer sizes prefill chunks from measured step times, so that a step
// carrying decodes stays under Config.MaxStepLatency while prompts stream
// in beside them.
//
// A step's time is modelled as fixed + perToken × tokens + perAttn ×
// attended: a step has a cost of its own (the weights read once), a cost
// per row (the matrix products), and a cost per position a row attends to
// (attention, which grows with the context: a 64-token chunk at position
// 1,400 costs far more than one at position 0). The three are fitted by
// least squares over exponentially weighted moving averages of the steps
// run: each completed step moves the averages of its tokens, attended
// positions, time and their products by a fraction pacerAlpha. While the
// steps' attention does not vary apart from their tokens, the fit falls
// back to fixed + perToken × tokens; while their sizes are all alike, to
// the mean time per token, which overstates the cost (the fixed part is
// spread over the tokens) and so errs towards shorter steps, whose sizes
// then differ and give the slope.
//
// While the steps are all alike (as they become once the chunks settle at
// the bound) nothing can be fitted; the pacer then keeps the slopes of
// its last fit and moves only the fixed part, so that the level follows
// the steps measured and the attention still grows with the context.
//
// Step times are noisy (a shared machine, the Go scheduler, the cache), and
// the bound is a bound, not a mean: the pacer aims below the bound by
// pacerSpreads times the relative spread of the measured times around its
// model (their standard deviation over their mean: noise on a shared
// machine scales with the step, as when another process takes a core).
//
// It is the step loop's; not safe for concurrent use.
type pacer struct {
	// Weighted means of tokens n, attended positions a, seconds t and
	// their products.
	n, a, t, nn, na, aa, nt, at, tt float64
	steps                           int
	// slopes is the last fit of both slopes, if any.
	slopes stepModel
}

// pacerAlpha is the weight of the newest step in the moving averages:
// about the last dozen steps count.
const pacerAlpha = 1.0 / 8

// pacerWarmup is the steps measured before the pacer limits a chunk.
const pacerWarmup = 3

// pacerSpreads is how many relative spreads of the step times around the
// model the pacer aims below the bound, and pacerMaxMargin the most of the
// bound it takes off for them.
const (
	pacerSpreads   = 2
	pacerMaxMargin = 0.4
)

// stepShape is the work of a step: rows fed and positions attended to,
// summed over rows (a row at position p attends to p+1 positions).
type stepShape struct{ tokens, attended int }

// attendedBy is the positions n rows attend to that follow from position
// from on: from+1 + … + from+n.
func attendedBy(from, n int) int { return n*from + n*(n+1)/2 }

// observe records a completed step of shape w that took d.
func (p *pacer) observe(w stepShape, d time.Duration) {
	n, a, t := float64(w.tokens), float64(w.attended), d.Seconds()
	if p.steps == 0 {
		p.n, p.a, p.t = n, a, t
		p.nn, p.na, p.aa, p.nt, p.at, p.tt = n*n, n*a, a*a, n*t, a*t, t*t
	} else {
		u := pacerAlpha
		p.n += u * (n - p.n)
		p.a += u * (a - p.a)
		p.t += u * (t - p.t)
		p.nn += u * (n*n - p.nn)
		p.na += u * (n*a - p.na)
		p.aa += u * (a*a - p.aa)
		p.nt += u * (n*t - p.nt)
		p.at += u * (a*t - p.at)
		p.tt += u * (t*t - p.tt)
	}
	p.steps++
}

// stepModel is a fitted step time, in seconds.
type stepModel struct{ fixed, perToken, perAttn float64 }

func (m stepModel) time(tokens, attended float64) float64 {
	return m.fixed + m.perToken*tokens + m.perAttn*attended
}

// model returns the fitted step time, false before pacerWarmup steps were
// measured.
func (p *pacer) model() (stepModel, bool) {
	if p.steps < pacerWarmup || p.n <= 0 || p.t <= 0 {
		return stepModel{}, false
	}
	vnn, vaa, vna := p.nn-p.n*p.n, p.aa-p.a*p.a, p.na-p.n*p.a
	cnt, cat := p.nt-p.n*p.t, p.at-p.a*p.t
	// Both slopes: when the sizes and the attention both vary, and not
	// in lockstep (their correlation below 0.99).
	if det := vnn*vaa - vna*vna; vnn > 1 && vaa > 1 && det > 0.02*vnn*vaa {
		m := stepModel{perToken: (cnt*vaa - cat*vna) / det, perAttn: (cat*vnn - cnt*vna) / det}
		m.fixed = p.t - m.perToken*p.n - m.perAttn*p.a
		if m.perToken > 0 && m.perAttn >= 0 && m.fixed >= 0 {
			p.slopes = m
			return m, true
		}
	}
	// The last fit's slopes, the fixed part moved to the steps measured
	// since (the slopes scaled down when they alone exceed them).
	if m := p.slopes; m.perToken > 0 {
		if v := m.perToken*p.n + m.perAttn*p.a; v > p.t {
			m.perToken, m.perAttn = m.perToken*p.t/v, m.perAttn*p.t/v
		}
		m.fixed = p.t - m.perToken*p.n - m.perAttn*p.a
		return m, true
	}
	// Sizes differing by less than a token or so carry no slope.
	if vnn > 1 {
		m := stepModel{perToken: cnt / vnn}
		m.fixed = p.t - m.perToken*p.n
		if m.perToken > 0 && m.fixed >= 0 {
			return m, true
		}
	}
	return stepModel{perToken: p.t / p.n}, true
}

// spread is the standard deviation, in seconds, of the measured step
// times around m: the root of the weighted mean of (t − m(n, a))².
func (p *pacer) spread(m stepModel) float64 {
	f, b, c := m.fixed, m.perToken, m.perAttn
	v := p.tt - 2*(f*p.t+b*p.nt+c*p.at) + f*f + b*b*p.nn + c*c*p.aa + 2*(f*b*p.n+f*c*p.a+b*c*p.na)
	return math.Sqrt(max(v, 0))
}

// chunk is the prefill tokens a step may add to the decode rows base and
// stay under bound, the chunk's first token at position from: between
// floor and ceiling, ceiling while nothing has been measured yet.
func (p *pacer) chunk(bound time.Duration, base stepShape, from, floor, ceiling int) int {
	m, ok := p.model()
	if !ok {
		return ceiling
	}
	// The largest k with time(base + k rows from from) ≤ target:
	// ½c·k² + (b + c(from+½))·k + time(base) − target ≤ 0.
	target := bound.Seconds() * (1 - min(pacerSpreads*p.spread(m)/p.t, pacerMaxMargin))
	rest := target - m.time(float64(base.tokens), float64(base.attended))
	b := m.perToken + m.perAttn*(float64(from)+0.5)
	var k float64
	switch {
	case rest <= 0:
		k = 0
	case m.perAttn == 0:
		k = rest / b
	default:
		c := m.perAttn / 2
		k = (-b + math.Sqrt(b*b+4*c*rest)) / (2 * c)
	}
	n := int(min(k, float64(ceiling)))
	return min(max(n, floor), ceiling)
}
