package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/ops/bench"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// TestQueue runs every queue scenario at a tiny size on the TinyStories
// 260K model and checks that every job was answered and the figures are
// there, never their values.
func TestQueue(t *testing.T) {
	t.Parallel()
	path := modeltest.StoriesPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stacks := 0
	var weights map[string]float64 // the fairness stack's
	start := func(ctx context.Context, o bench.StackOpts) (*devstack.Stack, error) {
		stacks++
		if o.TenantWeights != nil {
			weights = o.TenantWeights
		}
		blocks := o.KVBlocks
		if blocks == 0 {
			blocks = 256
		}
		return devstacktest.Start(t, devstack.Config{Models: worker.ModelsConfig{Models: []string{path}, Threads: 1,
			Sched: sched.Config{KVBlocks: blocks, MaxRunning: o.MaxRunning, HostSwapMB: -1, Metrics: o.Metrics}}, TenantWeights: o.TenantWeights}), nil
	}
	var out bytes.Buffer
	res, err := bench.Queue(ctx, bench.QueueConfig{Stack: start,
		PromptTokens: 20, MaxTokens: 24, FairFirst: 6, FairLate: 2, FairDelay: 100 * time.Millisecond, FairWeight: 2,
		Backlog: 6, Probes: 2, ProbeGap: 10 * time.Millisecond, PressureBlocks: 6, PressureJobs: 5, LowLatencyJobs: 2,
		MixJobs: 10, MidPrompt: 100, LongPrompt: 200, EvictLong: 2, EvictShort: 4, EvictLongTokens: 48, SerialSample: 1,
		SharedJobs: 4, SystemTokens: 64, Decoders: 2, DecodeTokens: 16, HugePrompt: 300, ToolChainJobs: 3, ToolChainRounds: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if stacks != 5 {
		t.Errorf("%d stacks, want one per scenario", stacks)
	}
	if len(res.Fairness) != 2 {
		t.Fatalf("fairness %+v", res.Fairness)
	}
	for i, f := range res.Fairness {
		// tenant-b weighs 2: its share is ⅔ when it is late, tenant-a's ⅓ when it is.
		if f.LateQueue.N != []int{2, 6}[i] || f.FirstJobs+f.LateJobs != 8 || f.ShareError < 0 || f.ShareError > 2 || f.WindowS < 0 ||
			f.WantShare != []float64{2.0 / 3, 1.0 / 3}[i] {
			t.Errorf("fairness %+v", f)
		}
	}
	if weights["tenant-b"] != 2 || len(weights) != 1 {
		t.Errorf("the fairness stack's tenant weights %v, want tenant-b 2", weights)
	}
	if p := res.Priority; p == nil || p.Idle.N != 2 || p.Loaded.N != 2 || p.Backlog != 6 || p.Idle.P50 <= 0 || p.Ratio <= 0 {
		t.Errorf("priority %+v", p)
	}
	if p := res.Pressure; p == nil || p.Totals.Jobs != 7 || p.Totals.OutputTokens <= 0 || p.IdleQueue.N != 2 || p.LoadedQueue.N != 2 || p.JobBlocks != 3 {
		t.Errorf("pressure %+v", p)
	}
	s := res.Seed
	if s == nil || s.Mixed.Jobs != 10 || s.Evict.Jobs != 6 || s.SerialS <= 0 || s.Shared.Jobs != 4 || s.PrefixTok <= 0 ||
		s.LaterTTFT.N != 3 || s.DecodeAlone.N != 2 || s.DecodeWithHuge.N != 2 {
		t.Errorf("seed %+v", s)
	}
	if tc := res.ToolChain; tc == nil || tc.Jobs != 3 || tc.OnePool.Totals.Jobs != 3 || tc.ContextIDs.Totals.Jobs != 3 ||
		tc.OnePool.ToolMs <= 0 || tc.ContextIDs.GenMs <= 0 || tc.OnePool.PerJob.N != 3 {
		t.Errorf("toolchain %+v", tc)
	}
	for _, part := range []string{"toolchain: 1 rounds of 3 concurrent jobs", "fairness: tenant-a submits 6 jobs", "fairness: tenant-b submits 2 jobs", "priority: 2 high-priority jobs",
		"pressure: 6-block arena", "seed, mixed lengths", "seed, long and short", "KV blocks used", "seed, shared system prompt", "seed, a 300-token prompt"} {
		if !strings.Contains(out.String(), part) {
			t.Errorf("report without %q:\n%s", part, out.String())
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc["seed"] == nil || doc["fairness"] == nil {
		t.Errorf("json (%v):\n%s", err, js.String())
	}
	t.Log(out.String())
}
