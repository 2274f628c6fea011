package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
)

// SeedResult is the seed scenario's four parts.
type SeedResult struct {
	// Mixed is the mixed-length burst: half the prompts shorter than 64
	// tokens, 30% of MidPrompt, 20% of LongPrompt, max_tokens 32.
	Mixed Totals `json:"mixed"`
	// Evict is the long-and-short burst; SerialS estimates the same jobs
	// one at a time: the mean time (first submit to finish) of
	// SerialSample jobs of each kind run alone, times each kind's count.
	Evict   Totals  `json:"evict"`
	SerialS float64 `json:"evict_serial_s_estimate"`
	// KVBaseline is the scheduler's kv_cache_blocks_used gauge before the
	// burst, KVAfter the gauge when the last job ended, and KVBackS how
	// long after that it read the baseline again (-1: not within 10 s).
	KVBaseline float64 `json:"kv_blocks_used_baseline"`
	KVAfter    float64 `json:"kv_blocks_used_at_end"`
	KVBackS    float64 `json:"kv_back_to_baseline_s"`
	// Shared is the burst sharing a system prompt of SystemTokens ; Duplicated the prefill
	// tokens computed beyond one prefill of the shared prefix: Σ(input −
	// cached) − (Σ input − (jobs − 1)·prefix). The prefix is the prompt
	// tokens with the system prompt less those without it.
	Shared     Totals `json:"shared"`
	PrefixTok  int    `json:"shared_prefix_tokens"`
	Duplicated int    `json:"duplicated_prefill_tokens"`
	// DuplicatedFull is the scheduler's count of prompt tokens computed
	// in full blocks another sequence computed too
	// (zerolayer_prefill_duplicated_tokens_total over the burst): unlike
	// Duplicated it leaves out the shared prefix's partial last block,
	// which no block cache can share. Attached counts the jobs that waited
	// for another's prefill of their prefix (zerolayer_prefix_attaches_total).
	DuplicatedFull float64 `json:"duplicated_full_block_tokens"`
	Attached       float64 `json:"prefix_attaches"`
	FirstTTFT      float64 `json:"first_ttft_ms"`
	LaterTTFT      Dist    `json:"later_ttft_ms"`
	// DecodeAlone and DecodeWithHuge are the decoders' inter_token_ms_p99
	// alone and while a HugePrompt-token prompt is prefilled.
	DecodeAlone    Dist `json:"decoders_inter_token_p99_alone_ms"`
	DecodeWithHuge Dist `json:"decoders_inter_token_p99_with_prompt_ms"`
	// HugeTTFT is the prompt's own time to first token from submission:
	// what the decoders' bound costs it.
	HugeTTFT float64 `json:"prompt_ttft_ms"`
}

// SeedParts are the seed scenario's parts, in the order it runs them; a
// part runs alone as scenario "seed:<part>".
func SeedParts() []string { return []string{"mixed", "evict", "shared", "huge"} }

// seed runs the seed scenario's parts named (all of them when none).
func (q *queueRun) seed(parts ...string) (*SeedResult, error) {
	res := &SeedResult{}
	funcs := map[string]func(*SeedResult) error{"mixed": q.seedMixed, "evict": q.seedEvict, "shared": q.seedShared, "huge": q.seedHuge}
	if len(parts) == 0 {
		parts = SeedParts()
	}
	for _, p := range parts {
		if err := funcs[p](res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (q *queueRun) seedMixed(res *SeedResult) error {
	c := q.cfg
	cl, err := q.client("tenant-mixed")
	if err != nil {
		return err
	}
	n := c.n(c.MixJobs)
	var reqs []*contracts.JobRequest
	for i := 0; i < n; i++ {
		tokens := 16 + q.r.IntN(48)
		switch i % 10 {
		case 5, 6, 7:
			tokens = c.MidPrompt
		case 8, 9:
			tokens = c.LongPrompt
		}
		req, err := q.job(cl, "", tokens, 32, contracts.PriorityNormal)
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	ds, err := q.serve(cl, reqs)
	if err != nil {
		return err
	}
	res.Mixed = totals(ds)
	fmt.Fprintf(q.w, "seed, mixed lengths (50%% < 64 tokens, 30%% %d, 20%% %d; max_tokens 32): all %d served\n  %s\n", c.MidPrompt, c.LongPrompt, len(ds), res.Mixed)
	return nil
}

func (q *queueRun) seedEvict(res *SeedResult) error {
	c := q.cfg
	cl, err := q.client("tenant-evict")
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := q.metrics.Register(reg); err != nil {
		return err
	}
	nl, ns := c.n(c.EvictLong), c.n(c.EvictShort)
	kinds := []struct{ n, max int }{{nl, c.EvictLongTokens}, {ns, 32}}
	var reqs []*contracts.JobRequest
	for i := 0; i < nl+ns; i++ {
		k := kinds[1]
		// The long jobs spread among the short ones.
		if i%((nl+ns)/nl) == 0 && countLong(reqs, c.EvictLongTokens) < nl {
			k = kinds[0]
		}
		req, err := q.job(cl, "", c.PromptTokens, k.max, contracts.PriorityNormal)
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	if res.KVBaseline, err = gauge(reg, "zerolayer_kv_cache_blocks_used"); err != nil {
		return err
	}
	ds, err := q.serve(cl, reqs)
	if err != nil {
		return err
	}
	end := time.Now()
	if res.KVAfter, err = gauge(reg, "zerolayer_kv_cache_blocks_used"); err != nil {
		return err
	}
	res.KVBackS = -1
	for time.Since(end) < 10*time.Second {
		v, err := gauge(reg, "zerolayer_kv_cache_blocks_used")
		if err != nil {
			return err
		}
		if v <= res.KVBaseline {
			res.KVBackS = time.Since(end).Seconds()
			break
		}
		if err := q.sleep(50 * time.Millisecond); err != nil {
			return err
		}
	}
	res.Evict = totals(ds)
	for _, k := range kinds {
		var sample []*contracts.JobRequest
		for i := 0; i < min(c.SerialSample, k.n); i++ {
			req, err := q.job(cl, "", c.PromptTokens, k.max, contracts.PriorityNormal)
			if err != nil {
				return err
			}
			sample = append(sample, req)
		}
		alone, err := q.alone(cl, sample)
		if err != nil {
			return err
		}
		var sum float64
		for _, d := range alone {
			sum += d.Usage.FinishedAt.Sub(d.Submitted).Seconds()
		}
		res.SerialS += sum / float64(len(alone)) * float64(k.n)
	}
	back := "not within 10 s"
	if res.KVBackS >= 0 {
		back = fmt.Sprintf("after %.2f s", res.KVBackS)
	}
	fmt.Fprintf(q.w, "seed, long and short: %d × max_tokens %d and %d × 32 (≈%d-token prompts): all %d served\n  %s\n",
		nl, c.EvictLongTokens, ns, c.PromptTokens, len(ds), res.Evict)
	fmt.Fprintf(q.w, "  together %.1f s vs one at a time ≈%.1f s (estimated from %d of each kind alone): %.2f×\n",
		res.Evict.Seconds, res.SerialS, c.SerialSample, ratio(res.SerialS, res.Evict.Seconds))
	fmt.Fprintf(q.w, "  KV blocks used (scheduler gauge zerolayer_kv_cache_blocks_used): %.0f before, %.0f when the last job ended, back to baseline %s\n",
		res.KVBaseline, res.KVAfter, back)
	return nil
}

func countLong(reqs []*contracts.JobRequest, long int) int {
	n := 0
	for _, r := range reqs {
		if r.MaxTokens == long {
			n++
		}
	}
	return n
}

// counter reads a counter of reg, 0 when it has none.
func counter(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// gauge reads a gauge of reg.
func gauge(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("bench: no gauge %s (is the stack's scheduler reporting to the metrics?)", name)
}

func (q *queueRun) seedShared(res *SeedResult) error {
	c := q.cfg
	cl, err := q.client("tenant-shared")
	if err != nil {
		return err
	}
	system := q.words(c.SystemTokens)
	if _, err := q.job(cl, "", 20, 1, contracts.PriorityNormal); err != nil { // measures the template without a system prompt
		return err
	}
	n := c.n(c.SharedJobs)
	var reqs []*contracts.JobRequest
	for i := 0; i < n; i++ {
		req, err := q.job(cl, system, c.SystemTokens+12, 16, contracts.PriorityNormal)
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	// The shared prefix: the template's tokens with the system prompt
	// less those without it (job measured both).
	q.mu.Lock()
	res.PrefixTok = q.overhead[true] - q.overhead[false]
	q.mu.Unlock()
	reg := prometheus.NewRegistry()
	if err := q.metrics.Register(reg); err != nil {
		return err
	}
	dup0, att0 := counter(reg, "zerolayer_prefill_duplicated_tokens_total"), counter(reg, "zerolayer_prefix_attaches_total")
	ds, err := q.serve(cl, reqs)
	if err != nil {
		return err
	}
	res.DuplicatedFull = counter(reg, "zerolayer_prefill_duplicated_tokens_total") - dup0
	res.Attached = counter(reg, "zerolayer_prefix_attaches_total") - att0
	res.Shared = totals(ds)
	res.Duplicated = (res.Shared.InputTokens - res.Shared.CachedTokens) - (res.Shared.InputTokens - (len(ds)-1)*res.PrefixTok)
	first := 0
	for i, d := range ds {
		if d.admitted().Before(ds[first].admitted()) {
			first = i
		}
	}
	res.FirstTTFT = ds[first].Usage.TimeToFirstTokenMs
	var later []float64
	for i, d := range ds {
		if i != first {
			later = append(later, d.Usage.TimeToFirstTokenMs)
		}
	}
	res.LaterTTFT = dist(later)
	fmt.Fprintf(q.w, "seed, shared system prompt: %d jobs, a %d-token shared prefix, max_tokens 16: all %d served\n  %s\n",
		n, res.PrefixTok, len(ds), res.Shared)
	fmt.Fprintf(q.w, "  %d input tokens, %d cached: %d duplicated prefill tokens (%.0f%% of the %d an ideal prefix cache saves)\n",
		res.Shared.InputTokens, res.Shared.CachedTokens, res.Duplicated,
		100*ratio(float64(res.Duplicated), float64((len(ds)-1)*res.PrefixTok)), (len(ds)-1)*res.PrefixTok)
	fmt.Fprintf(q.w, "  full-block prompt tokens computed twice (scheduler counter): %.0f; jobs that waited for another's prefill of their prefix: %.0f\n",
		res.DuplicatedFull, res.Attached)
	fmt.Fprintf(q.w, "  time to first token after admission: first admitted %.0f ms, later ones %s\n", res.FirstTTFT, res.LaterTTFT)
	return nil
}

func (q *queueRun) seedHuge(res *SeedResult) error {
	c := q.cfg
	cl, err := q.client("tenant-decode")
	if err != nil {
		return err
	}
	ch, err := q.client("tenant-huge")
	if err != nil {
		return err
	}
	p99 := func(d done) float64 { return d.Usage.InterTokenMsP99 }
	var hd []done
	run := func(huge bool) ([]done, error) {
		reqs, err := q.jobs(cl, c.Decoders, c.PromptTokens, c.DecodeTokens, contracts.PriorityNormal)
		if err != nil {
			return nil, err
		}
		reqs[0].Stream = true
		first, err := q.submit(cl, reqs[0])
		if err != nil {
			return nil, err
		}
		// Follow the first decoder from its start, to send the huge
		// prompt once the decoders are decoding.
		ctx, cancel := context.WithCancel(q.ctx)
		defer cancel()
		events, _, err := cl.Events(ctx, first.id)
		if err != nil {
			return nil, err
		}
		rest, err := q.burst(cl, reqs[1:])
		if err != nil {
			return nil, err
		}
		ps := append([]*pending{first}, rest...)
		var hp *pending
		if huge {
			deltas := 0
			for ev := range events {
				if ev.Type == contracts.EventDelta {
					deltas++
				}
				if deltas >= 4 || ev.Type != contracts.EventDelta && ev.Type != contracts.EventStarted {
					break
				}
			}
			req, err := q.job(ch, "", c.HugePrompt, 1, contracts.PriorityNormal)
			if err != nil {
				return nil, err
			}
			if hp, err = q.submit(ch, req); err != nil {
				return nil, err
			}
		}
		ds, err := collect(ps, false)
		if err != nil {
			return nil, err
		}
		if hp != nil {
			if hd, err = collect([]*pending{hp}, false); err != nil {
				return nil, err
			}
		}
		return ds, nil
	}
	alone, err := run(false)
	if err != nil {
		return err
	}
	with, err := run(true)
	if err != nil {
		return err
	}
	res.DecodeAlone, res.DecodeWithHuge = dist(of(alone, p99)), dist(of(with, p99))
	res.HugeTTFT = hd[0].fromSubmit()
	fmt.Fprintf(q.w, "seed, a %d-token prompt under %d decoders (max_tokens %d): the decoders' inter_token_ms_p99\n", c.HugePrompt, c.Decoders, c.DecodeTokens)
	fmt.Fprintf(q.w, "  alone:            %s\n  with the prompt:  %s (ratio of p99s %.2f)\n", res.DecodeAlone, res.DecodeWithHuge, ratio(res.DecodeWithHuge.P99, res.DecodeAlone.P99))
	fmt.Fprintf(q.w, "  the prompt's time to first token from submission: %.0f ms\n", res.HugeTTFT)
	return nil
}
