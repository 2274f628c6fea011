package bench

import (
	"fmt"

	"github.com/zerolayer/zerolayer/contracts"
)

// ToolChainResult is the toolchain scenario, the seed's "tool chain
// pressure": bursts of concurrent jobs whose system prompt declares three
// inline tools (a regex_matcher whose pattern has .*, a toxicity_filter
// and a pii_redactor), with the tools in one pool (no context_id) and in
// three (a context_id each). Each arrangement runs ToolChainRounds bursts,
// the two alternating so that neither always runs on a warmer machine.
type ToolChainResult struct {
	Jobs       int          `json:"concurrent_jobs"`
	OnePool    ToolChainRun `json:"one_pool"`
	ContextIDs ToolChainRun `json:"context_ids"`
	// Ratio is ContextIDs' tool share over OnePool's.
	Ratio float64 `json:"context_ids_to_one_pool_share_ratio"`
}

// ToolChainRun is one arrangement's jobs.
type ToolChainRun struct {
	Totals Totals `json:"totals"`
	// ToolMs is Σ tool_execution_time_ms; GenMs is Σ time_per_token_ms ×
	// output_tokens; Share is ToolMs ÷ GenMs. The seed's bar is a share
	// below 0.8 (MeetsBar).
	ToolMs   float64 `json:"tool_execution_time_ms"`
	GenMs    float64 `json:"generation_ms"`
	Share    float64 `json:"tool_share_of_generation"`
	MeetsBar bool    `json:"below_80_percent"`
	// PerJob is each job's tool_execution_time_ms.
	PerJob Dist `json:"tool_ms_per_job"`
}

// ToolChainSystem is the scenario's system prompt, the tools in a
// context_id each when pools is set.
func ToolChainSystem(pools bool) string {
	ctx := func(id string) string {
		if !pools {
			return ""
		}
		return ` context_id="` + id + `"`
	}
	return "You write one-line stories.\n" +
		`<tool name="regex_matcher"` + ctx("extract") + `><param name="pattern">[A-Z].*</param></tool>` + "\n" +
		`<tool name="toxicity_filter"` + ctx("safety") + `><param name="words">stupid, hate, ugly</param></tool>` + "\n" +
		`<tool name="pii_redactor"` + ctx("privacy") + `><param name="entities">email, phone</param></tool>` + "\n"
}

// toolChain runs the toolchain scenario.
func (q *queueRun) toolChain() (*ToolChainResult, error) {
	c := q.cfg
	cl, err := q.client("tenant-tools")
	if err != nil {
		return nil, err
	}
	n := c.n(c.ToolChainJobs)
	mk := func(pools bool, jobs int) ([]*contracts.JobRequest, error) {
		reqs := make([]*contracts.JobRequest, jobs)
		for i := range reqs {
			r, err := q.job(cl, ToolChainSystem(pools), c.PromptTokens, c.MaxTokens, contracts.PriorityNormal)
			if err != nil {
				return nil, err
			}
			temp, seed := 0.8, q.r.Uint64()
			r.Temperature, r.Seed = &temp, &seed
			reqs[i] = r
		}
		return reqs, nil
	}
	runs := map[bool][]done{}
	// One job of each first: the tools compile (once per pool) outside
	// the measurement.
	for _, pools := range []bool{false, true} {
		reqs, err := mk(pools, 1)
		if err != nil {
			return nil, err
		}
		if _, err := q.serve(cl, reqs); err != nil {
			return nil, err
		}
	}
	for range c.ToolChainRounds {
		for _, pools := range []bool{false, true} {
			reqs, err := mk(pools, n)
			if err != nil {
				return nil, err
			}
			ds, err := q.serve(cl, reqs)
			if err != nil {
				return nil, err
			}
			runs[pools] = append(runs[pools], ds...)
		}
	}
	res := &ToolChainResult{Jobs: n, OnePool: toolChainRun(runs[false]), ContextIDs: toolChainRun(runs[true])}
	res.Ratio = ratio(res.ContextIDs.Share, res.OnePool.Share)
	fmt.Fprintf(q.w, "toolchain: %d rounds of %d concurrent jobs (≈%d-token prompts, max_tokens %d), three tools in the system prompt (regex_matcher [A-Z].*, toxicity_filter, pii_redactor)\n",
		c.ToolChainRounds, n, c.PromptTokens, c.MaxTokens)
	for _, r := range []struct {
		name string
		run  ToolChainRun
	}{{"one pool   ", res.OnePool}, {"context_ids", res.ContextIDs}} {
		d := r.run.PerJob
		fmt.Fprintf(q.w, "  %s: tools %.1f ms of %.1f ms generation (Σ time_per_token_ms × output_tokens): %.2f%% (seed bar < 80%%: %v); tool ms per job p50 %.2f p99 %.2f max %.2f\n",
			r.name, r.run.ToolMs, r.run.GenMs, 100*r.run.Share, r.run.MeetsBar, d.P50, d.P99, d.Max)
	}
	fmt.Fprintf(q.w, "  share with context_ids ÷ one pool: %.2f×\n", res.Ratio)
	return res, nil
}

func toolChainRun(ds []done) ToolChainRun {
	r := ToolChainRun{Totals: totals(ds), PerJob: dist(of(ds, func(d done) float64 { return d.Usage.ToolExecutionTimeMs }))}
	for _, d := range ds {
		r.ToolMs += d.Usage.ToolExecutionTimeMs
		r.GenMs += d.Usage.TimePerTokenMs * float64(d.Usage.OutputTokens)
	}
	if r.GenMs > 0 {
		r.Share = r.ToolMs / r.GenMs
	}
	r.MeetsBar = r.GenMs > 0 && r.Share < 0.8
	return r
}
