package bench

import (
	"fmt"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// PriorityResult is the priority scenario: high-priority time to first
// token from submission (usage queue_ms + time_to_first_token_ms) on an
// idle stack and under a backlog of low-priority jobs.
type PriorityResult struct {
	Backlog int  `json:"backlog_jobs"`
	Idle    Dist `json:"idle_ttft_ms"`
	Loaded  Dist `json:"loaded_ttft_ms"`
	// Ratio is Loaded.P50 ÷ Idle.P50 (target ≤ 1.5) and RatioP99 the same
	// of the p99s.
	Ratio    float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	// IdleQueue and LoadedQueue are the parts of those times spent before
	// admission (usage queue_ms: JetStream, the intake, the scheduler's
	// queue); the rest is the prefill up to the first token.
	IdleQueue   Dist `json:"idle_queue_ms"`
	LoadedQueue Dist `json:"loaded_queue_ms"`
	// BacklogDone is the backlog's jobs that finished before the rest were
	// canceled, once the high-priority ones had ended.
	BacklogDone int `json:"backlog_done"`
}

// priority submits the probes ProbeGap apart on the idle stack, then
// behind a low-priority backlog; the backlog is canceled at the end.
func (q *queueRun) priority() (*PriorityResult, error) {
	c := q.cfg
	cl, err := q.client("tenant-low")
	if err != nil {
		return nil, err
	}
	ch, err := q.client("tenant-high")
	if err != nil {
		return nil, err
	}
	probes := func() ([]done, error) {
		reqs, err := q.jobs(ch, c.n(c.Probes), c.PromptTokens, c.MaxTokens, contracts.PriorityHigh)
		if err != nil {
			return nil, err
		}
		var ps []*pending
		for i, req := range reqs {
			if i > 0 {
				if err := q.sleep(c.ProbeGap); err != nil {
					return nil, err
				}
			}
			p, err := q.submit(ch, req)
			if err != nil {
				return nil, err
			}
			ps = append(ps, p)
		}
		return collect(ps, false)
	}
	idle, err := probes()
	if err != nil {
		return nil, err
	}
	backlog, err := q.jobs(cl, c.n(c.Backlog), c.PromptTokens, c.MaxTokens, contracts.PriorityLow)
	if err != nil {
		return nil, err
	}
	bp, err := q.burst(cl, backlog)
	if err != nil {
		return nil, err
	}
	// Let the worker fill its batch and JetStream hold the rest.
	if err := q.sleep(2 * time.Second); err != nil {
		return nil, err
	}
	loaded, err := probes()
	if err != nil {
		return nil, err
	}
	for _, p := range bp {
		_ = cl.Cancel(q.ctx, p.id) // a finished job cannot be canceled
	}
	bd, err := collect(bp, true)
	if err != nil {
		return nil, err
	}
	res := &PriorityResult{Backlog: len(backlog), Idle: dist(of(idle, done.fromSubmit)), Loaded: dist(of(loaded, done.fromSubmit))}
	res.Ratio, res.RatioP99 = ratio(res.Loaded.P50, res.Idle.P50), ratio(res.Loaded.P99, res.Idle.P99)
	queue := func(d done) float64 { return d.Usage.QueueMs }
	res.IdleQueue, res.LoadedQueue = dist(of(idle, queue)), dist(of(loaded, queue))
	for _, d := range bd {
		if d.Usage.Status == contracts.StatusCompleted {
			res.BacklogDone++
		}
	}
	fmt.Fprintf(q.w, "priority: %d high-priority jobs %v apart (≈%d-token prompts, max_tokens %d), time to first token from submission\n",
		len(idle), c.ProbeGap, c.PromptTokens, c.MaxTokens)
	fmt.Fprintf(q.w, "  idle:                          %s\n", res.Idle)
	fmt.Fprintf(q.w, "  behind %3d low-priority jobs:  %s\n", res.Backlog, res.Loaded)
	fmt.Fprintf(q.w, "  of which before admission: idle %s; loaded %s\n", res.IdleQueue, res.LoadedQueue)
	fmt.Fprintf(q.w, "  ratio loaded/idle: p50 %.2f×, p99 %.2f× (target ≤ 1.5×); %d backlog jobs finished before the rest were canceled\n",
		res.Ratio, res.RatioP99, res.BacklogDone)
	return res, nil
}
