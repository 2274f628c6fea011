package bench

import (
	"fmt"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// FairnessResult is one order of the fairness scenario: tenant First
// submits its jobs, tenant Late its own Delay later, all of one shape.
type FairnessResult struct {
	First     string  `json:"first_tenant"`
	Late      string  `json:"late_tenant"`
	FirstJobs int     `json:"first_jobs"`
	LateJobs  int     `json:"late_jobs"`
	DelayS    float64 `json:"delay_s"`
	// LateQueue is the late tenant's queue times (usage queue_ms).
	LateQueue Dist `json:"late_queue_ms"`
	// LateFirstAdmittedS, FirstLastAdmittedS and FirstLastFinishedS are
	// seconds from the late tenant's first submission: until its first
	// job was admitted (created_at + queue_ms), until the first tenant's
	// last job was admitted, and until it finished (finished_at). A late
	// first admission after the first tenant's last one means the late
	// tenant waited for the whole backlog.
	LateFirstAdmittedS float64 `json:"late_first_admitted_s"`
	FirstLastAdmittedS float64 `json:"first_last_admitted_s"`
	FirstLastFinishedS float64 `json:"first_last_finished_s"`
	// WindowS is the time both tenants had jobs unfinished: from the late
	// tenant's first submission to the earlier of the two tenants' last
	// finishes. FirstTokensPerS and LateTokensPerS are each tenant's
	// output tokens in that window per second, each job's tokens spread
	// evenly from its first token (created_at + queue_ms +
	// time_to_first_token_ms) to finished_at.
	WindowS         float64 `json:"window_s"`
	FirstTokensPerS float64 `json:"first_tokens_per_s"`
	LateTokensPerS  float64 `json:"late_tokens_per_s"`
	// ShareError is |share − ½| ÷ ½ of the late tenant's token share in
	// the window, against equal weights (target ≤ 0.10).
	ShareError float64 `json:"share_error"`
}

// fairness runs both orders: the big tenant first, then the small one
// first.
func (q *queueRun) fairness() ([]FairnessResult, error) {
	c := q.cfg
	var out []FairnessResult
	for _, o := range []struct {
		first, late string
		n1, n2      int
	}{{"tenant-a", "tenant-b", c.n(c.FairFirst), c.n(c.FairLate)}, {"tenant-b", "tenant-a", c.n(c.FairLate), c.n(c.FairFirst)}} {
		r, err := q.fairOrder(o.first, o.late, o.n1, o.n2)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
		fmt.Fprintf(q.w, "fairness: %s submits %d jobs (≈%d-token prompts, max_tokens %d), %s submits %d jobs %.1f s later\n",
			r.First, r.FirstJobs, c.PromptTokens, c.MaxTokens, r.Late, r.LateJobs, r.DelayS)
		fmt.Fprintf(q.w, "  %s queue time: %s\n", r.Late, r.LateQueue)
		fmt.Fprintf(q.w, "  from %s's first submit: its first job admitted after %.1f s; %s's last job admitted after %.1f s, finished after %.1f s\n",
			r.Late, r.LateFirstAdmittedS, r.First, r.FirstLastAdmittedS, r.FirstLastFinishedS)
		fmt.Fprintf(q.w, "  both backlogged %.1f s: %s %.1f tokens/s, %s %.1f tokens/s; share error vs equal weights %.0f%% (target ≤ 10%%)\n",
			r.WindowS, r.First, r.FirstTokensPerS, r.Late, r.LateTokensPerS, 100*r.ShareError)
	}
	return out, nil
}

func (q *queueRun) fairOrder(first, late string, n1, n2 int) (*FairnessResult, error) {
	c1, err := q.client(first)
	if err != nil {
		return nil, err
	}
	c2, err := q.client(late)
	if err != nil {
		return nil, err
	}
	r1, err := q.jobs(c1, n1, q.cfg.PromptTokens, q.cfg.MaxTokens, contracts.PriorityNormal)
	if err != nil {
		return nil, err
	}
	r2, err := q.jobs(c2, n2, q.cfg.PromptTokens, q.cfg.MaxTokens, contracts.PriorityNormal)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p1, err := q.burst(c1, r1)
	if err != nil {
		return nil, err
	}
	if err := q.sleep(q.cfg.FairDelay - time.Since(start)); err != nil {
		return nil, err
	}
	p2, err := q.burst(c2, r2)
	if err != nil {
		return nil, err
	}
	d1, err := collect(p1, false)
	if err != nil {
		return nil, err
	}
	d2, err := collect(p2, false)
	if err != nil {
		return nil, err
	}
	res := &FairnessResult{First: first, Late: late, FirstJobs: n1, LateJobs: n2, DelayS: q.cfg.FairDelay.Seconds(),
		LateQueue: dist(of(d2, func(d done) float64 { return d.Usage.QueueMs }))}
	t0 := earliest(d2, func(d done) time.Time { return d.Submitted })
	secs := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	res.LateFirstAdmittedS = secs(earliest(d2, done.admitted))
	res.FirstLastAdmittedS = secs(latest(d1, done.admitted))
	end1, end2 := latest(d1, finished), latest(d2, finished)
	res.FirstLastFinishedS = secs(end1)
	end := end1
	if end2.Before(end) {
		end = end2
	}
	res.WindowS = max(secs(end), 0) // 0: the first tenant was done before the late one came
	a, b := tokensIn(d1, t0, end), tokensIn(d2, t0, end)
	res.FirstTokensPerS, res.LateTokensPerS = ratio(a, res.WindowS), ratio(b, res.WindowS)
	if a+b > 0 {
		share := b / (a + b)
		res.ShareError = max(share-0.5, 0.5-share) / 0.5
	}
	return res, nil
}

func finished(d done) time.Time { return d.Usage.FinishedAt }

func earliest(ds []done, f func(done) time.Time) time.Time {
	var t time.Time
	for _, d := range ds {
		if v := f(d); t.IsZero() || v.Before(t) {
			t = v
		}
	}
	return t
}

func latest(ds []done, f func(done) time.Time) time.Time {
	var t time.Time
	for _, d := range ds {
		if v := f(d); v.After(t) {
			t = v
		}
	}
	return t
}

// tokensIn is the output tokens of ds generated in [from, to], each job's
// spread evenly from its first token to its finish (the first token
// itself at the first-token time).
func tokensIn(ds []done, from, to time.Time) float64 {
	var n float64
	for _, d := range ds {
		out := float64(d.Usage.OutputTokens)
		if out == 0 {
			continue
		}
		a, b := d.firstToken(), d.Usage.FinishedAt
		if !a.Before(from) && !a.After(to) {
			n++
		}
		rest := out - 1
		span := b.Sub(a).Seconds()
		if rest <= 0 || span <= 0 {
			continue
		}
		lo, hi := maxTime(a, from), minTime(b, to)
		if hi.After(lo) {
			n += rest * hi.Sub(lo).Seconds() / span
		}
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
