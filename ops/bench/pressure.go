package bench

import (
	"fmt"

	"github.com/zerolayer/zerolayer/contracts"
)

// PressureResult is the pressure scenario: ordinary jobs whose worst
// cases together overflow a small KV arena, and low_latency jobs among
// them.
type PressureResult struct {
	Blocks int `json:"kv_blocks"`
	// JobBlocks is an ordinary job's worst case: ⌈(prompt + max_tokens) ÷
	// 16⌉ blocks.
	JobBlocks int `json:"job_blocks_worst_case"`
	// Totals sums the usage of every job under pressure (preemptions,
	// recomputed_tokens, output_tokens; first submit to last finish).
	Totals Totals `json:"totals"`
	// PreemptPerToken and RecomputedPerToken are per generated token.
	PreemptPerToken    float64 `json:"preemptions_per_token"`
	RecomputedPerToken float64 `json:"recomputed_per_token"`
	// IdleQueue and LoadedQueue are the low_latency jobs' queue times
	// (queue_ms) alone and under pressure; Ratio is the p50s' (target ≤
	// 2).
	IdleQueue   Dist    `json:"low_latency_idle_queue_ms"`
	LoadedQueue Dist    `json:"low_latency_loaded_queue_ms"`
	Ratio       float64 `json:"ratio_p50"`
}

// pressure runs the low_latency jobs one at a time on the idle stack,
// then the ordinary burst with the low_latency jobs submitted among it.
func (q *queueRun) pressure() (*PressureResult, error) {
	c := q.cfg
	cl, err := q.client("tenant-ordinary")
	if err != nil {
		return nil, err
	}
	ll, err := q.client("tenant-latency")
	if err != nil {
		return nil, err
	}
	llJobs := func() ([]*contracts.JobRequest, error) {
		reqs, err := q.jobs(ll, c.n(c.LowLatencyJobs), c.PromptTokens, c.MaxTokens, contracts.PriorityNormal)
		for _, r := range reqs {
			r.Memory = &contracts.MemoryOptions{LowLatency: true}
		}
		return reqs, err
	}
	reqs, err := llJobs()
	if err != nil {
		return nil, err
	}
	idle, err := q.alone(ll, reqs)
	if err != nil {
		return nil, err
	}
	ordinary, err := q.jobs(cl, c.n(c.PressureJobs), c.PromptTokens, c.MaxTokens, contracts.PriorityNormal)
	if err != nil {
		return nil, err
	}
	if reqs, err = llJobs(); err != nil {
		return nil, err
	}
	ps, err := q.burst(cl, ordinary)
	if err != nil {
		return nil, err
	}
	var lp []*pending
	for _, req := range reqs {
		if err := q.sleep(3 * c.ProbeGap); err != nil {
			return nil, err
		}
		p, err := q.submit(ll, req)
		if err != nil {
			return nil, err
		}
		lp = append(lp, p)
	}
	od, err := collect(ps, false)
	if err != nil {
		return nil, err
	}
	ld, err := collect(lp, false)
	if err != nil {
		return nil, err
	}
	queue := func(d done) float64 { return d.Usage.QueueMs }
	res := &PressureResult{Blocks: c.PressureBlocks, JobBlocks: (c.PromptTokens + c.MaxTokens + 15) / 16,
		Totals: totals(append(od, ld...)), IdleQueue: dist(of(idle, queue)), LoadedQueue: dist(of(ld, queue))}
	res.PreemptPerToken, res.RecomputedPerToken = res.Totals.PerToken()
	res.Ratio = ratio(res.LoadedQueue.P50, res.IdleQueue.P50)
	fmt.Fprintf(q.w, "pressure: %d-block arena, %d ordinary jobs of ≤%d blocks (≈%d-token prompts, max_tokens %d) and %d low_latency jobs\n",
		res.Blocks, len(od), res.JobBlocks, c.PromptTokens, c.MaxTokens, len(ld))
	fmt.Fprintf(q.w, "  %s\n", res.Totals)
	fmt.Fprintf(q.w, "  low_latency queue time idle:           %s\n", res.IdleQueue)
	fmt.Fprintf(q.w, "  low_latency queue time under pressure: %s\n", res.LoadedQueue)
	fmt.Fprintf(q.w, "  ratio p50 %.2f× (target ≤ 2×)\n", res.Ratio)
	return res, nil
}
