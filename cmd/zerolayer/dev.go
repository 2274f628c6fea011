package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/contracts/queuemetrics"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

func runDev(ctx context.Context, args []string) error {
	fs := newFlags("dev")
	dataDir := fs.String("data", filepath.Join(filepath.Dir(cacheDir()), "dev"), "folder for the embedded NATS state (and a private PostgreSQL cluster, if one is needed)")
	natsPort := fs.Int("nats-port", 0, "port of the embedded NATS server (0: a free one)")
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL, else the local server, else a private cluster)")
	var models stringList
	fs.Var(&models, "model", "model to serve, by path or name (repeatable; default stories260k)")
	threads := fs.Int("threads", 0, "CPU threads (default: all)")
	demo := fs.Bool("demo", false, "submit a mixed batch from two tenants, stream one job, wait for all, print the reports, and exit")
	verbose := fs.Bool("v", false, "log every job")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9400)")
	httpAddr := fs.String("http", "", "serve the HTTP gateway on this address (e.g. :8080), tenant from the X-Zerolayer-Tenant header")
	var sf schedFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(models) == 0 {
		models = stringList{devstack.DefaultModel}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	o, err := setupMetrics()
	if err != nil {
		return err
	}
	mc, err := sf.models(models, *threads, o.sched)
	if err != nil {
		return err
	}
	cfg := devstack.Config{Dir: *dataDir, NATSPort: *natsPort, DatabaseURL: cmp.Or(*dbURL, os.Getenv("DATABASE_URL")), Models: mc, WorkerMetrics: o.metrics, HTTPAddr: *httpAddr, Logger: log}
	if !*demo {
		// A demo is over in a minute; a long-running stack tells the other
		// commands where it is.
		cfg.AnnounceFile = devAnnounceFile()
	}
	if *httpAddr != "" {
		cfg.GatewayMetrics = gateway.NewMetrics()
		if err := cfg.GatewayMetrics.Register(o.reg); err != nil {
			return err
		}
	}
	st, err := startStack(ctx, cfg, &sf)
	if err != nil {
		return err
	}
	defer stopStack(st)
	fw := fleet.New(st.JetStream())
	if err := fw.Start(ctx); err != nil {
		return fmt.Errorf("following the fleet's buckets: %w", err)
	}
	defer fw.Stop()
	if err := registerDevCollectors(o.reg, st, fw); err != nil {
		return err
	}
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, o.reg, nil)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	model := st.Models().Names()[0]
	fmt.Fprintf(os.Stderr, "zerolayer dev: NATS %s, PostgreSQL %s, serving %s\n", st.NATSURL(), dbNote(st, *dbURL), st.Models().Describe())
	if addr := st.GatewayAddr(); addr != "" && st.Models().EmbeddingOnly(model) {
		fmt.Fprintf(os.Stderr, "HTTP gateway on http://%s: curl -H 'X-Zerolayer-Tenant: acme' http://%s/v1/embeddings -d '{\"model\":\"%s\",\"input\":[\"Once upon a time\"]}'\n",
			addr, addr, model)
	} else if addr != "" {
		fmt.Fprintf(os.Stderr, "HTTP gateway on http://%s: curl -H 'X-Zerolayer-Tenant: acme' http://%s/v1/chat/completions -d '{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}'\n",
			addr, addr, model)
	}
	if *demo {
		return devstack.RunDemo(ctx, st, stdout)
	}
	// The other commands find this stack through its announce file.
	from := time.Now().UTC()
	from = time.Date(from.Year(), from.Month(), 1, 0, 0, 0, 0, time.UTC)
	fmt.Fprintf(os.Stderr, "other commands on this machine use this stack (announced in %s):\n", devAnnounceFile())
	fmt.Fprintf(os.Stderr, "  submit with: zerolayer submit --tenant acme --model %s --prompt \"Once upon a time\"\n", model)
	fmt.Fprintf(os.Stderr, "  report with: zerolayer report --tenant acme --from %s --to %s\nCtrl-C stops.\n", from.Format(time.DateOnly), from.AddDate(0, 1, 0).Format(time.DateOnly))
	<-ctx.Done()
	return nil
}

// registerDevCollectors registers what the dev stack exports beside the
// worker's own metrics: billing's, the queue depths of every stream (as
// the worker exports ZL_JOBS and ZL_DLQ and billing ZL_USAGE, so that the
// dashboards and alerts work against a dev stack too) with, when fw is
// set, the jobs waiting for a model no live worker serves, and the
// quotas'.
func registerDevCollectors(reg prometheus.Registerer, st *devstack.Stack, fw *fleet.Watch) error {
	qc := queuemetrics.NewCollector(st.JetStream(), contracts.StreamJobs, contracts.StreamDLQ, contracts.StreamUsage)
	if fw != nil {
		qc.WithFleet(fw)
	}
	if err := errors.Join(reg.Register(ledger.NewCollector(st.Billing())), reg.Register(qc)); err != nil {
		return err
	}
	for _, q := range st.Quotas() {
		if err := q.Register(reg); err != nil {
			return err
		}
	}
	return nil
}

// dbNote says which database the stack uses and, when it was given, how.
func dbNote(st *devstack.Stack, flag string) string {
	switch {
	case flag != "":
		return st.DatabaseNote() + " (--database-url)"
	case os.Getenv("DATABASE_URL") != "":
		return st.DatabaseNote() + " (DATABASE_URL)"
	}
	return "(" + st.DatabaseNote() + ")"
}

// startStack starts a dev stack; sf names the flag behind a device error.
func startStack(ctx context.Context, cfg devstack.Config, sf *schedFlags) (*devstack.Stack, error) {
	st, err := devstack.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := st.Start(ctx); err != nil {
		return nil, sf.servingError(err)
	}
	return st, nil
}

// stopStack stops a dev stack, giving running jobs 15 seconds.
func stopStack(st *devstack.Stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st.Stop(ctx)
}
