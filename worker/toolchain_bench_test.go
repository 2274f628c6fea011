package worker_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/bench"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// toolChainOutput is what the regex_matcher lets through.
var toolChainOutput = regexp.MustCompile(`^[A-Z].*$`)

// toolChainTotals sums one burst's usage records.
type toolChainTotals struct {
	jobs, outputTokens int
	toolMs, genMs      float64 // Σ tool_execution_time_ms, Σ time_per_token_ms × output_tokens
}

// share is the tools' time as a fraction of the generation time: the
// seed's bar is below 0.8.
func (t toolChainTotals) share() float64 {
	if t.genMs == 0 {
		return 0
	}
	return t.toolMs / t.genMs
}

// toolChainBurst submits jobs jobs at once through the producer and NATS
// and sums their usage.
func toolChainBurst(tb testing.TB, b *workertest.Bundle, jobs int, pools bool, round int) toolChainTotals {
	tb.Helper()
	ctx := context.Background()
	ids := make([]string, jobs)
	for i := range ids {
		r := request(fmt.Sprintf("Tell me about a %s named %c%s.", []string{"cat", "dog", "bird", "fox"}[i%4], 'A'+rune(i%26), "im"), 64, contracts.PriorityNormal)
		r.System = bench.ToolChainSystem(pools)
		temp, seed := 0.8, uint64(round*1000+i)
		r.Temperature, r.Seed = &temp, &seed
		id, err := b.Client.Submit(ctx, r, nil)
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = id
	}
	var mu sync.Mutex
	var tot toolChainTotals
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, 120e9)
			defer cancel()
			res, err := b.Client.Wait(ctx, id)
			if err != nil || res.Status != contracts.StatusCompleted || res.Usage == nil || res.ToolFailureReason != "" {
				tb.Errorf("job %s: %v %+v", id, err, res)
				return
			}
			if !toolChainOutput.MatchString(res.Text) {
				tb.Errorf("job %s: output %q does not match the regex_matcher's [A-Z].*", id, res.Text)
			}
			u := res.Usage
			mu.Lock()
			tot.jobs++
			tot.outputTokens += u.OutputTokens
			tot.toolMs += u.ToolExecutionTimeMs
			tot.genMs += u.TimePerTokenMs * float64(u.OutputTokens)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return tot
}

// BenchmarkToolChainPressure is the seed's "tool chain pressure" scenario
// on stories260K through NATS and the scheduler: bursts of 16 and 32
// concurrent jobs whose system prompt declares three tools (a
// regex_matcher with .*, a toxicity_filter, a pii_redactor), in one pool
// (no context_id) or in three (context_ids). It reports the tools' time
// as a share of the generation time, Σ tool_execution_time_ms ÷
// Σ(time_per_token_ms × output_tokens) (the seed's bar: below 80%), and
// the per-job means. One op is one burst; measure, never assert:
//
//	go test ./worker -run '^$' -bench ToolChainPressure -benchtime 3x
func BenchmarkToolChainPressure(b *testing.B) {
	for _, jobs := range []int{16, 32} {
		for _, pools := range []bool{false, true} {
			name := "one_pool"
			if pools {
				name = "context_ids"
			}
			b.Run(fmt.Sprintf("jobs=%d/%s", jobs, name), func(b *testing.B) {
				bundle := workertest.Setup(b, contracts.StreamsConfig{})
				bundle.StartWorkerConfig(b, workertest.NewSchedExecutor(b, sched.Config{MaxRunning: jobs}), worker.Config{ID: "bench", Concurrency: 2 * jobs})
				toolChainBurst(b, bundle, 1, pools, -1) // compile the tools
				var tot toolChainTotals
				b.ResetTimer()
				for i := range b.N {
					t := toolChainBurst(b, bundle, jobs, pools, i)
					tot.jobs += t.jobs
					tot.outputTokens += t.outputTokens
					tot.toolMs += t.toolMs
					tot.genMs += t.genMs
				}
				b.StopTimer()
				if tot.jobs == 0 {
					return
				}
				n := float64(tot.jobs)
				b.ReportMetric(100*tot.share(), "tool_%_of_gen")
				b.ReportMetric(tot.toolMs/n, "tool_ms/job")
				b.ReportMetric(tot.genMs/n, "gen_ms/job")
				b.ReportMetric(float64(tot.outputTokens)/n, "out_tokens/job")
			})
		}
	}
}

// TestToolChainPressureRuns runs one small burst of the benchmark's jobs
// in each arrangement: every job completes with its three tools and the
// regex obeyed, and the figures are there (their values are the
// benchmark's business).
func TestToolChainPressureRuns(t *testing.T) {
	t.Parallel()
	for _, pools := range []bool{false, true} {
		sp, err := contracts.ParseSystemPrompt(bench.ToolChainSystem(pools))
		if err != nil || len(sp.Tools) != 3 || (sp.Tools[0].ContextID != "") != pools || !strings.Contains(string(sp.Tools[0].Params["pattern"]), ".*") {
			t.Fatalf("system prompt: %+v %v", sp, err)
		}
	}
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{}), worker.Config{ID: "w1", Concurrency: 8})
	for _, pools := range []bool{false, true} {
		tot := toolChainBurst(t, b, 4, pools, 0)
		if tot.jobs != 4 || tot.outputTokens == 0 || tot.toolMs <= 0 || tot.genMs <= 0 {
			t.Errorf("pools %v: %+v", pools, tot)
		}
		t.Logf("pools %v: tools %.2f ms, generation %.2f ms (%.1f%%)", pools, tot.toolMs, tot.genMs, 100*tot.share())
	}
}
