package sched

import "time"

// pacer sizes prefill chunks from measured step times, so that a step
// carrying decodes stays under Config.MaxStepLatency while prompts stream
// in beside them.
//
// A step's time is modelled as fixed + perToken × tokens (a step has a
// cost of its own, the weights read once, and a cost per row), fitted by
// least squares over exponentially weighted moving averages of the steps
// run: each completed step moves the averages of its tokens n, its time
// t, n² and n·t by a fraction pacerAlpha. Steps of assorted sizes (decode
// only, decode plus a chunk) give the slope; while they are all alike the
// per-token cost is the mean time per token, which overstates it (the
// fixed part is spread over the tokens) and so errs towards shorter
// steps, whose sizes then differ and give the slope.
//
// It is the step loop's; not safe for concurrent use.
type pacer struct {
	n, t, nn, nt float64 // weighted means: tokens, seconds, tokens², tokens×seconds
	steps        int
}

// pacerAlpha is the weight of the newest step in the moving averages:
// about the last dozen steps count.
const pacerAlpha = 1.0 / 8

// pacerWarmup is the steps measured before the pacer limits a chunk.
const pacerWarmup = 3

// observe records a completed step of tokens rows that took d.
func (p *pacer) observe(tokens int, d time.Duration) {
	n, t := float64(tokens), d.Seconds()
	if p.steps == 0 {
		p.n, p.t, p.nn, p.nt = n, t, n*n, n*t
	} else {
		a := pacerAlpha
		p.n += a * (n - p.n)
		p.t += a * (t - p.t)
		p.nn += a * (n*n - p.nn)
		p.nt += a * (n*t - p.nt)
	}
	p.steps++
}

// model returns the fitted fixed cost of a step and cost per token, in
// seconds, and false before pacerWarmup steps were measured.
func (p *pacer) model() (fixed, perToken float64, ok bool) {
	if p.steps < pacerWarmup || p.n <= 0 || p.t <= 0 {
		return 0, 0, false
	}
	// Sizes differing by less than a token or so carry no slope.
	if v := p.nn - p.n*p.n; v > 1 {
		perToken = (p.nt - p.n*p.t) / v
		fixed = p.t - perToken*p.n
		if perToken > 0 && fixed >= 0 {
			return fixed, perToken, true
		}
	}
	return 0, p.t / p.n, true
}

// chunk is the prefill tokens a step beside decodes decode rows may carry
// to stay under bound: between floor and ceiling, ceiling while nothing
// has been measured yet.
func (p *pacer) chunk(bound time.Duration, decodes, floor, ceiling int) int {
	fixed, perToken, ok := p.model()
	if !ok {
		return ceiling
	}
	n := int((bound.Seconds()-fixed)/perToken) - decodes
	return min(max(n, floor), ceiling)
}
