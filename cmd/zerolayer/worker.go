package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/contracts/queuemetrics"
	"github.com/zerolayer/zerolayer/gpu/nvml"
	"github.com/zerolayer/zerolayer/worker"
)

func runWorker(ctx context.Context, args []string) error {
	fs := newFlags("worker")
	nf := addNATSFlag(fs)
	var models stringList
	fs.Var(&models, "model", "model to serve, by path or name (repeatable)")
	id := fs.String("id", "", "worker id (default host-pid)")
	prios := fs.String("priorities", "high,normal,low", "priorities to pull, in order")
	buckets := fs.String("buckets", "short,medium,long", "prompt-length buckets to pull")
	conc := fs.Int("concurrency", 0, "jobs held at once (default: one, or a batch's worth with the scheduler)")
	threads := fs.Int("threads", 0, "CPU threads (default: all)")
	provision := fs.Bool("provision", true, "create or update the streams and consumers at start")
	replicas := fs.Int("replicas", 1, "stream replicas when provisioning (3 in production)")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long running jobs may finish before they are handed back")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9400)")
	weights := fs.String("tenant-weights", "", "tenants' shares within a class, of the intake and of the batch, e.g. acme=2,globex=0.5 (others weigh 1)")
	deltaTokens := fs.Int("delta-tokens", 16, "most tokens one delta event carries (1: one event per token)")
	deltaInterval := fs.Duration("delta-interval", worker.DefaultDeltaInterval, "how often a streaming job's tokens are published, coalesced, after its first (0: every token at once)")
	affinityWait := fs.Duration("prefix-affinity-wait", time.Second, "a job whose prompt starts with a prefix another live worker holds (a conversation's earlier turns, a batch's instruction) is passed on to that worker's queue, and taken by any worker after waiting there this long; 0 turns passing on off")
	limits := fs.Bool("limits", true, "enforce the tenants' limits (zerolayer tenants set-limits), as published by billing in ZL_LIMITS")
	var sf schedFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *deltaTokens < 1 {
		return usagef("--delta-tokens %d: want 1 or more", *deltaTokens)
	}
	if *deltaInterval == 0 {
		*deltaInterval = -1 // zero would take the default
	}
	if *affinityWait <= 0 {
		*affinityWait = -1 // off
	}
	cfg := worker.Config{ID: *id, Concurrency: *conc, Provision: *provision, Streams: contracts.StreamsConfig{Replicas: *replicas},
		DeltaTokens: *deltaTokens, DeltaInterval: *deltaInterval, AffinityWait: *affinityWait,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	for _, p := range strings.Split(*prios, ",") {
		pr, err := contracts.ParsePriority(strings.TrimSpace(p))
		if err != nil {
			return usagef("--priorities: %v", err)
		}
		cfg.Priorities = append(cfg.Priorities, pr)
	}
	if *weights != "" {
		cfg.TenantWeights = map[string]float64{}
		for _, kv := range strings.Split(*weights, ",") {
			t, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			w, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil || contracts.ValidateTenant(t) != nil || !(w > 0) {
				return usagef("--tenant-weights: %q is not TENANT=WEIGHT with a positive weight", kv)
			}
			cfg.TenantWeights[t] = w
		}
	}
	for _, b := range strings.Split(*buckets, ",") {
		bk, err := contracts.ParseBucket(strings.TrimSpace(b))
		if err != nil {
			return usagef("--buckets: %v", err)
		}
		cfg.Buckets = append(cfg.Buckets, bk)
	}
	o, err := setupMetrics()
	if err != nil {
		return err
	}
	// The probes answer from the start: alive, and not ready until the
	// models are loaded, NATS is connected and the consumers are bound.
	var rd readiness
	rd.waiting("loading models")
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, o.reg, &rd)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	s, err := sf.open(ctx, models, *threads, o.sched)
	if err != nil {
		return err
	}
	defer s.Close()
	if *conc == 0 {
		*conc = s.Concurrency()
	}
	cfg.Concurrency, cfg.Metrics = *conc, o.metrics
	if s.OnGPU() {
		// Device memory, utilization, temperature and power, when NVML
		// answers.
		if mon, err := nvml.Open(); err != nil {
			fmt.Fprintf(os.Stderr, "GPU telemetry unavailable: %v\n", err)
		} else {
			defer mon.Close()
			o.reg.MustRegister(nvml.NewCollector(mon))
		}
	}
	rd.waiting("connecting to NATS")
	nc, err := nf.connect("worker", nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The depth of ZL_JOBS by class and of ZL_DLQ, and the jobs waiting
	// for a model no live worker serves, read at each scrape (every worker
	// exports the same numbers: alerts take their max).
	fw := fleet.New(js)
	if err := fw.Start(ctx); err != nil {
		return fmt.Errorf("following the fleet's buckets: %w", err)
	}
	defer fw.Stop()
	o.reg.MustRegister(queuemetrics.NewCollector(js, contracts.StreamJobs, contracts.StreamDLQ).WithFleet(fw))
	if *limits {
		q, stop, err := startQuota(ctx, nc, "worker", o.reg, cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Quota = q
	}
	w, err := worker.New(nc, s.Executor(), cfg)
	if err != nil {
		return err
	}
	rd.waiting("binding the consumers")
	if err := w.Start(ctx); err != nil {
		return err
	}
	rd.check(w.Ready)
	fmt.Fprintf(os.Stderr, "worker %s serving %s from %s\n", w.ID(), s.Describe(), nc.ConnectedUrlRedacted())
	<-ctx.Done()
	rd.waiting("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		fmt.Fprintf(os.Stderr, "shutdown: running jobs handed back after %v\n", *shutdown)
	}
	return nil
}
