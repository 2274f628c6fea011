package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// finishOrder submits each tenant's jobs (all of one shape) through NATS
// before a worker serving one job at a time starts, waits for all, and
// returns the tenants in the order their jobs finished.
func finishOrder(t *testing.T, weights map[string]float64, counts map[string]int) []string {
	t.Helper()
	return finishOrderOn(t, workertest.NewExecutor(t), 1, weights, counts)
}

// finishOrderOn is finishOrder with another executor and concurrency.
func finishOrderOn(t *testing.T, exec worker.Executor, conc int, weights map[string]float64, counts map[string]int) []string {
	t.Helper()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	clients := map[string]*producer.Client{"acme": b.Client, "globex": b.Other}
	type job struct{ tenant, id string }
	var jobs []job
	for _, tenant := range []string{"acme", "globex"} { // acme's backlog first
		for range counts[tenant] {
			id, err := clients[tenant].Submit(ctx, request("Once upon a time", 4, contracts.PriorityNormal), nil)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{tenant, id})
		}
	}
	b.StartWorkerConfig(t, exec, worker.Config{ID: "w1", Concurrency: conc, TenantWeights: weights})
	type fin struct {
		tenant string
		res    *contracts.Result
	}
	var done []fin
	for _, j := range jobs {
		done = append(done, fin{j.tenant, wait(t, clients[j.tenant], j.id)})
	}
	slices.SortFunc(done, func(a, b fin) int { return a.res.FinishedAt.Compare(b.res.FinishedAt) })
	var order []string
	for _, f := range done {
		if f.res.Status != contracts.StatusCompleted {
			t.Fatalf("%s's job: %+v", f.tenant, f.res)
		}
		order = append(order, f.tenant)
	}
	return order
}

// TestIntakeFairAcrossTenants: tenant globex's 8 jobs queued behind acme's
// 40 in the same class are served in turn with acme's, not after acme's
// backlog: the intake takes the least-served tenant's next job, not the
// stream's oldest.
func TestIntakeFairAcrossTenants(t *testing.T) {
	t.Parallel()
	order := finishOrder(t, nil, map[string]int{"acme": 40, "globex": 8})
	last := slices.Index(order, "globex")
	for i, tenant := range order {
		if tenant == "globex" {
			last = i
		}
	}
	// Alternating, globex's 8th job finishes by the 16th or 17th job
	// overall (which tenant goes first is a tie); FIFO would put it 48th.
	if last > 16 {
		t.Errorf("globex's last job finished %dth of 48 (want by the 17th); order %v", last+1, order)
	}
}

// TestIntakeTenantWeights: with acme weighing 2 and globex 1, both
// backlogged with jobs of one shape, acme gets two jobs for each of
// globex's.
func TestIntakeTenantWeights(t *testing.T) {
	t.Parallel()
	order := finishOrder(t, map[string]float64{"acme": 2}, map[string]int{"acme": 30, "globex": 30})
	n := 0
	for _, tenant := range order[:30] {
		if tenant == "acme" {
			n++
		}
	}
	if n < 19 || n > 21 {
		t.Errorf("acme got %d of the first 30 jobs, want 20 ± 1 (weight 2 against 1): %v", n, fmt.Sprint(order[:30]))
	}
}

// TestIntakeFairWithBatching: with continuous batching (four sequences a
// step), two tenants backlogged in one class, one queued entirely before
// the other, share the batch: each has about half of the first 30 jobs
// finished (FIFO would give them all to acme).
func TestIntakeFairWithBatching(t *testing.T) {
	t.Parallel()
	exec := workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 4})
	order := finishOrderOn(t, exec, 2*4+8, nil, map[string]int{"acme": 30, "globex": 30})
	n := 0
	for _, tenant := range order[:30] {
		if tenant == "globex" {
			n++
		}
	}
	if n < 12 || n > 18 {
		t.Errorf("globex got %d of the first 30 jobs, want 15 ± 3: %v", n, order[:30])
	}
}

// TestIntakeLateTenantMidRun: globex submits while the worker is already
// draining acme's backlog (its notices arrive mid-run, its consumer is
// made then): globex's jobs finish before acme's backlog does.
func TestIntakeLateTenantMidRun(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	var acmeIDs []string
	for range 30 {
		id, err := b.Client.Submit(ctx, request("Once upon a time", 400, contracts.PriorityNormal), nil)
		if err != nil {
			t.Fatal(err)
		}
		acmeIDs = append(acmeIDs, id)
	}
	// Long jobs on two slots: globex's notices are old by the time a slot
	// frees and the intake first pulls its class.
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 2}), worker.Config{ID: "w1", Concurrency: 2*2 + 8})
	wait(t, b.Client, acmeIDs[0]) // the worker is draining acme's backlog
	var globexIDs []string
	for range 5 {
		id, err := b.Other.Submit(ctx, request("Once upon a time", 24, contracts.PriorityNormal), nil)
		if err != nil {
			t.Fatal(err)
		}
		globexIDs = append(globexIDs, id)
	}
	var lastGlobex time.Time
	for _, id := range globexIDs {
		if r := wait(t, b.Other, id); r.FinishedAt.After(lastGlobex) {
			lastGlobex = r.FinishedAt
		}
	}
	after := 0
	for _, id := range acmeIDs {
		if wait(t, b.Client, id).FinishedAt.After(lastGlobex) {
			after++
		}
	}
	if after < 15 {
		t.Errorf("only %d of acme's 30 jobs finished after globex's last (globex waited for acme's backlog)", after)
	}
}

// TestLateTenantShareThroughNATS is issue 12's fairness scenario end to
// end: acme's backlog fills every slot of the worker's batch, then globex
// submits 16 jobs. While both have jobs in their share of the batch and
// more waiting (from globex's first token until three quarters of its
// jobs have ended), the output tokens split by the tenants' weights within
// ±10% — globex's jobs take their share of the batch by swapping acme's
// out, not by waiting for acme's jobs to end.
func TestLateTenantShareThroughNATS(t *testing.T) {
	if testing.Short() {
		// Under the race detector the intake's round trips slow far more
		// than the tiny model's steps, and the newcomer's ramp (one job
		// per intake cycle) takes a share of the short window.
		t.Skip("a share measured over a second of stories260K steps; run without -short")
	}
	t.Parallel()
	for _, weight := range []float64{1, 2} {
		t.Run(fmt.Sprint("globex-weighs-", weight), func(t *testing.T) {
			lateTenantShareThroughNATS(t, weight)
		})
	}
}

func lateTenantShareThroughNATS(t *testing.T, weight float64) {
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	metrics := sched.NewMetrics()
	exec := workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 8, Metrics: metrics})
	b.StartWorkerConfig(t, exec, worker.Config{ID: "w1", Concurrency: 64, TenantWeights: map[string]float64{"globex": weight}})
	// Jobs long beside the intake's round trips (a job that ends is
	// replaced by a pull from JetStream, which under a loaded machine
	// takes tens of milliseconds), and enough of them for a window of
	// about a second.
	job := func() *contracts.JobRequest { return greedy("Once upon a time", 450, contracts.PriorityNormal) }
	acme := submitN(t, b.Client, 64, job)
	// Every slot acme's: 8 tokens a step for a few steps.
	natstest.Until(t, 30*time.Second, "acme's jobs in every slot", func() bool { return metrics.TenantTokens("acme") >= 80 })
	start := time.Now()
	globex := submitN(t, b.Other, 24, job)
	// Sample both tenants' token counters until three quarters of
	// globex's jobs have ended (its last quarter then runs in its share of
	// the batch: it is backlogged up to about half, and at its share to
	// three quarters).
	type sample struct {
		at         time.Time
		acme, glob float64
	}
	read := func() sample {
		return sample{time.Now(), metrics.TenantTokens("acme"), metrics.TenantTokens("globex")}
	}
	samples := []sample{read()}
	ended := make(chan error, len(globex))
	for _, id := range globex {
		go func() {
			_, err := b.Other.Wait(ctx, id)
			ended <- err
		}()
	}
	for n := 0; n < 3*len(globex)/4; {
		select {
		case err := <-ended:
			if err != nil {
				t.Fatal(err)
			}
			n++
		case <-time.After(10 * time.Millisecond):
			samples = append(samples, read())
		}
	}
	last := read()
	// The window opens at globex's first token: the time to it is the
	// intake's and the first prefill's, tens of steps of this tiny model,
	// not a share (the queue benchmark reports it from submission).
	first := samples[0]
	for _, s := range samples {
		if s.glob > first.glob {
			break
		}
		first = s
	}
	a, g := last.acme-first.acme, last.glob-first.glob
	if a+g < 500 {
		t.Fatalf("only %.0f tokens generated while both were backlogged: too short a window to judge", a+g)
	}
	share, want := g/(a+g), weight/(weight+1)
	t.Logf("weight %v: first token %.0f ms after globex's submission; then %.1f s until three quarters of its jobs had ended: acme %.0f tokens, globex %.0f (share %.3f, want %.3f)",
		weight, first.at.Sub(start).Seconds()*1000, last.at.Sub(first.at).Seconds(), a, g, share, want)
	if d := share/want - 1; d < -0.1 || d > 0.1 {
		t.Errorf("globex's token share %.3f while both were backlogged, want %.3f ± 10%%", share, want)
	}
	for _, id := range globex {
		if r := wait(t, b.Other, id); r.Status != contracts.StatusCompleted {
			t.Errorf("globex's job %s: %+v", id, r)
		}
	}
	for _, id := range acme {
		if r := wait(t, b.Client, id); r.Status != contracts.StatusCompleted {
			t.Errorf("acme's job %s: %+v", id, r)
		}
	}
}
