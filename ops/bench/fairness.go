package bench

import (
	"fmt"
	"math"
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
	// MaxRunning is the worker's batch cap (QueueConfig.FairMaxRunning).
	MaxRunning int `json:"max_running,omitempty"`
	// BackloggedS is the time both tenants were backlogged, had jobs
	// waiting for the worker: from the late tenant's first submission to
	// the earlier of the two tenants' last first admissions.
	// FirstTokensPerS and LateTokensPerS are each tenant's output tokens
	// in that window per second, read from the scheduler's per-tenant
	// counters (zerolayer_tenant_generated_tokens_total) every 50 ms.
	BackloggedS     float64 `json:"backlogged_s"`
	FirstTokensPerS float64 `json:"first_tokens_per_s"`
	LateTokensPerS  float64 `json:"late_tokens_per_s"`
	// FirstWeight and LateWeight are the tenants' weights, and WantShare
	// the late tenant's share of the tokens they entitle it to:
	// LateWeight ÷ (FirstWeight + LateWeight).
	FirstWeight float64 `json:"first_weight"`
	LateWeight  float64 `json:"late_weight"`
	WantShare   float64 `json:"want_share"`
	// ShareError is |share − WantShare| ÷ WantShare of the late tenant's
	// token share while both were backlogged (target ≤ 0.10).
	ShareError float64 `json:"share_error"`
	// WindowS, LateTokensPerSUnfinished and ShareErrorUnfinished are the
	// same over the longer window while both had jobs unfinished (to the
	// earlier of the two tenants' last finishes): once a tenant's last
	// jobs run it is no longer backlogged, and its share is its demand.
	WindowS                  float64 `json:"window_s"`
	ShareErrorUnfinished     float64 `json:"share_error_unfinished"`
	LateTokensPerSUnfinished float64 `json:"late_tokens_per_s_unfinished"`
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
		fmt.Fprintf(q.w, "  both backlogged (jobs waiting) %.1f s, batch cap %d: %s %.1f tokens/s, %s %.1f tokens/s; %s's share %.1f%%, error vs weights %g:%g %.0f%% (target ≤ 10%%)\n",
			r.BackloggedS, r.MaxRunning, r.First, r.FirstTokensPerS, r.Late, r.LateTokensPerS,
			r.Late, 100*ratio(r.LateTokensPerS, r.FirstTokensPerS+r.LateTokensPerS), r.FirstWeight, r.LateWeight, 100*r.ShareError)
		fmt.Fprintf(q.w, "  both unfinished %.1f s: %s %.1f tokens/s; share error %.0f%%\n",
			r.WindowS, r.Late, r.LateTokensPerSUnfinished, 100*r.ShareErrorUnfinished)
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
	sampled := q.sampleTokens(first, late)
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
	tokens := sampled()
	weight := func(t string) float64 {
		if t == "tenant-b" {
			return q.cfg.FairWeight
		}
		return 1
	}
	res := &FairnessResult{First: first, Late: late, FirstJobs: n1, LateJobs: n2, DelayS: q.cfg.FairDelay.Seconds(), MaxRunning: max(q.cfg.FairMaxRunning, 0),
		FirstWeight: weight(first), LateWeight: weight(late),
		LateQueue: dist(of(d2, func(d done) float64 { return d.Usage.QueueMs }))}
	res.WantShare = res.LateWeight / (res.FirstWeight + res.LateWeight)
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
	_, b, e := tokens.shares(first, late, res.WantShare, t0, end)
	res.LateTokensPerSUnfinished, res.ShareErrorUnfinished = ratio(b, res.WindowS), e
	backlogged := minTime(latest(d1, done.admitted), latest(d2, done.admitted))
	res.BackloggedS = max(secs(backlogged), 0)
	a, b, e := tokens.shares(first, late, res.WantShare, t0, backlogged)
	res.FirstTokensPerS, res.LateTokensPerS, res.ShareError = ratio(a, res.BackloggedS), ratio(b, res.BackloggedS), e
	return res, nil
}

// tokenSamples are the scheduler's per-tenant output token counters
// (sched.Metrics.TenantTokens) read every sampleEvery: what each tenant
// got in a window, preemptions and all.
type tokenSamples []tokenSample

type tokenSample struct {
	at     time.Time
	tokens map[string]float64
}

const sampleEvery = 50 * time.Millisecond

// sampleTokens samples tenants' counters until the returned function is
// called, which returns the samples.
func (q *queueRun) sampleTokens(tenants ...string) func() tokenSamples {
	var out tokenSamples
	stop, done := make(chan struct{}), make(chan struct{})
	read := func() {
		s := tokenSample{at: time.Now(), tokens: map[string]float64{}}
		for _, t := range tenants {
			s.tokens[t] = q.metrics.TenantTokens(t)
		}
		out = append(out, s)
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			read()
			select {
			case <-tick.C:
			case <-stop:
				read()
				return
			}
		}
	}()
	return func() tokenSamples {
		close(stop)
		<-done
		return out
	}
}

// at is tenant's count at t, interpolated between the samples around it.
func (ts tokenSamples) at(tenant string, t time.Time) float64 {
	for i, s := range ts {
		if s.at.Before(t) {
			continue
		}
		if i == 0 {
			return s.tokens[tenant]
		}
		p := ts[i-1]
		f := t.Sub(p.at).Seconds() / s.at.Sub(p.at).Seconds()
		return p.tokens[tenant] + f*(s.tokens[tenant]-p.tokens[tenant])
	}
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1].tokens[tenant]
}

// shares returns the output tokens of tenants a and b in [from, to] and
// the error of b's share against want: |share − want| ÷ want.
func (ts tokenSamples) shares(a, b string, want float64, from, to time.Time) (na, nb, shareErr float64) {
	if !to.After(from) {
		return 0, 0, 0
	}
	na, nb = ts.at(a, to)-ts.at(a, from), ts.at(b, to)-ts.at(b, from)
	if na+nb > 0 {
		shareErr = math.Abs(nb/(na+nb)-want) / want
	}
	return na, nb, shareErr
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

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
