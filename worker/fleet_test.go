package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/contracts/queuemetrics"
	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestModelAwareIntake runs two workers that serve different models,
// stories260K and a generated qwen3, against the shipped NATS
// configuration (each role as its own user): ten jobs queued on the
// model-less subjects of the previous release before any worker starts
// (the stories worker, alone at first, runs its model's and passes the
// qwen3 ones on to their model's subject, where they wait, counted by
// zerolayer_jobs_waiting_unserved, until the qwen3 worker starts), then
// 1,000 jobs (200 in -short) split between the two models and two
// tenants. Every job completes on a worker serving its model, and none
// fails unknown_model. A job for a third model is refused at submit while
// the fleet is live and serves no such model; asked to wait, it is queued,
// counted in the gauge, and completes once a worker for it starts.
func TestModelAwareIntake(t *testing.T) {
	t.Parallel()
	jobs := 1000
	if testing.Short() {
		jobs = 200
	}
	ns := natstest.RunShipped(t, filepath.Join("..", "ops", "nats", "nats.conf"), "worker", "gateway")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	op := ns.Connect(t, "operator")
	ojs, err := jetstream.New(op)
	if err != nil {
		t.Fatal(err)
	}
	if err := contracts.EnsureStreams(ctx, ojs, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gen := func(name string, c synth.Config) string {
		path := filepath.Join(dir, name+".gguf")
		if err := synth.WriteFile(path, c); err != nil {
			t.Fatal(err)
		}
		return path
	}
	qwenCfg := synth.Tiny(gpu.F32)
	qwenCfg.Arch, qwenCfg.Context, qwenCfg.Seed = "qwen3", 512, 3
	llamaCfg := synth.Tiny(gpu.F32)
	llamaCfg.Context, llamaCfg.Seed = 512, 5
	paths := map[string]string{
		workertest.ModelName: modeltest.StoriesPath(t),
		"qwen3-tiny":         gen("qwen3-tiny", qwenCfg),
		"llama-tiny":         gen("llama-tiny", llamaCfg),
	}
	const stories, qwen, third = workertest.ModelName, "qwen3-tiny", "llama-tiny"

	// The queue metrics, as a worker process exports them, following the
	// fleet.
	fw := fleet.New(ojs)
	if err := fw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fw.Stop)
	qreg := prometheus.NewRegistry()
	qreg.MustRegister(queuemetrics.NewCollector(ojs, contracts.StreamJobs).WithFleet(fw))
	unserved := func(model string) float64 {
		mfs, err := qreg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "zerolayer_jobs_waiting_unserved" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == contracts.ModelToken(model) {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}

	// Workers, each on its own connection as the worker user, in 16 MB
	// arenas.
	workerMetrics := map[string]*worker.Metrics{}
	startWorker := func(id, model string) {
		t.Helper()
		m, err := worker.OpenModels(ctx, worker.ModelsConfig{Models: []string{paths[model]}, Threads: 1,
			Sched: sched.Config{KVMemoryMB: 16, HostSwapMB: 16, MaxRunning: 16}})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Names(); len(got) != 1 || got[0] != model {
			t.Fatalf("%s serves %v, want %s", id, got, model)
		}
		met := worker.NewMetrics()
		workerMetrics[id] = met
		nc := ns.Connect(t, "worker")
		w, err := worker.New(nc, m.Executor(), worker.Config{ID: id, Concurrency: m.Concurrency(), IdlePoll: 50 * time.Millisecond,
			HeartbeatInterval: time.Second, Metrics: met, Logger: workertest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w.Stop(sctx)
			m.Close()
		})
	}
	workerOf := map[string]string{stories: "w-stories", qwen: "w-qwen", third: "w-third"}
	forwarded := func(id string) float64 {
		reg := prometheus.NewRegistry()
		if err := workerMetrics[id].Register(reg); err != nil {
			t.Fatal(err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "zerolayer_intake_jobs_forwarded_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}

	// Producers of two tenants, as the gateway user.
	gnc := ns.Connect(t, "gateway")
	clients := map[string]*producer.Client{}
	for _, tenant := range []string{"acme", "globex"} {
		c, err := producer.New(gnc, producer.Config{Tenant: tenant, Models: map[string]string{stories: paths[stories], qwen: paths[qwen]}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[tenant] = c
	}
	request := func(model string, i int) *contracts.JobRequest {
		return &contracts.JobRequest{Model: model, MaxTokens: 3, Temperature: new(float64),
			Messages: []contracts.Message{{Role: "user", Content: fmt.Sprintf("Once upon a time %d", i)}}}
	}
	type job struct{ tenant, model, id string }
	var all []job

	// Ten jobs of the previous release's model-less form, queued before any
	// worker runs.
	for i := range 10 {
		tenant, model := []string{"acme", "globex"}[i%2], []string{stories, qwen}[i/5]
		r := request(model, i)
		r.ID = fmt.Sprintf("old-%02d", i)
		body, _ := json.Marshal(r)
		m := &nats.Msg{Subject: contracts.ModellessJobSubject(contracts.PriorityNormal, contracts.BucketShort, tenant, r.ID), Data: body,
			Header: contracts.NewHeader(tenant, contracts.NewTraceparent())}
		gjs, _ := jetstream.New(gnc)
		if _, err := gjs.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		all = append(all, job{tenant, model, r.ID})
	}
	began := time.Now()
	startWorker(workerOf[stories], stories)
	natstest.Until(t, 30*time.Second, "the stories worker passes the 5 old qwen3 jobs on", func() bool { return forwarded(workerOf[stories]) == 5 })
	natstest.Until(t, 10*time.Second, "the 5 passed-on jobs counted as waiting for an unserved model", func() bool { return unserved(qwen) == 5 })
	startWorker(workerOf[qwen], qwen)

	// The load: jobs split between the models and the tenants.
	var mu sync.Mutex
	for _, tenant := range []string{"acme", "globex"} {
		var reqs []*contracts.JobRequest
		var models []string
		for i := range jobs / 2 {
			model := []string{stories, qwen}[i%2]
			r := request(model, i)
			r.ID = fmt.Sprintf("j-%04d", i)
			reqs, models = append(reqs, r), append(models, model)
		}
		ids, errs := clients[tenant].SubmitMany(ctx, reqs, nil)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s job %d (%s): %v", tenant, i, models[i], err)
			}
			all = append(all, job{tenant, models[i], ids[i]})
		}
	}
	submitted := time.Since(began)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	wrong, unknown := 0, 0
	var waitErr error
	for _, j := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := clients[j.tenant].Wait(ctx, j.id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				waitErr = errors.Join(waitErr, fmt.Errorf("%s/%s: %w", j.tenant, j.id, err))
				return
			}
			if res.Error != nil && res.Error.Code == contracts.CodeUnknownModel {
				unknown++
			}
			if res.Status != contracts.StatusCompleted || res.Usage == nil || res.Usage.WorkerID != workerOf[j.model] || res.Usage.Model != j.model {
				wrong++
				if wrong <= 5 {
					t.Errorf("%s/%s for %s: %+v (error %v)", j.tenant, j.id, j.model, res.Usage, res.Error)
				}
			}
		}()
	}
	wg.Wait()
	if waitErr != nil {
		t.Fatal(waitErr)
	}
	ran := time.Since(began)
	if unknown != 0 || wrong != 0 {
		t.Fatalf("%d of %d jobs not completed by a worker of their model, %d failed unknown_model", wrong, len(all), unknown)
	}
	dlq, err := ojs.Stream(ctx, contracts.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	if n := dlq.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d dead letters", n)
	}
	t.Logf("%d jobs (%d of the model-less form, 5 passed on) on 2 workers of 2 models: submitted in %v, all completed by a worker of their model in %v, 0 unknown_model",
		len(all), 10, submitted.Round(time.Millisecond), ran.Round(time.Millisecond))

	// A third model: refused while the fleet is live and serves it not;
	// asked to wait, queued, counted, and run once its worker starts.
	c := clients["acme"]
	if _, err := c.Submit(ctx, request(third, 0), nil); !errors.Is(err, contracts.CodeUnknownModel) {
		t.Fatalf("a model no live worker serves, without wait_for_model: %v", err)
	}
	r := request(third, 1)
	r.WaitForModel = true
	id, err := c.Submit(ctx, r, nil)
	if err != nil {
		t.Fatalf("with wait_for_model: %v", err)
	}
	natstest.Until(t, 10*time.Second, "the waiting job counted", func() bool { return unserved(third) == 1 })
	waitStart := time.Now()
	startWorker(workerOf[third], third)
	res, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != contracts.StatusCompleted || res.Usage.WorkerID != workerOf[third] {
		t.Fatalf("the waiting job: %+v", res)
	}
	if n := unserved(third); n != 0 {
		t.Errorf("%v jobs still counted waiting for %s once it ran", n, third)
	}
	t.Logf("the job for %s waited (gauge 1) and completed %v after its worker started", third, time.Since(waitStart).Round(time.Millisecond))
}
