package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/billing"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// devStack is the whole system in one process.
type devStack struct {
	pg      *postgres
	pool    *pgxpool.Pool
	nats    interface{ Shutdown() }
	natsURL string
	nc      *nats.Conn
	js      jetstream.JetStream
	models  *served
	worker  *worker.Worker
	billing *billing.Service
}

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
		models = stringList{"stories260k"}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	o, err := sf.setup()
	if err != nil {
		return err
	}
	st, err := startDev(ctx, *dataDir, *natsPort, cmp.Or(*dbURL, os.Getenv("DATABASE_URL")), models, *threads, o.sched, o.metrics, log)
	if err != nil {
		return err
	}
	defer st.stop()
	o.reg.MustRegister(billing.NewCollector(st.billing))
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, o.reg)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	fmt.Fprintf(os.Stderr, "zerolayer dev: NATS %s, PostgreSQL (%s), serving %s\n", st.natsURL, st.pg.note, describe(st.models))
	if *httpAddr != "" {
		gm := gateway.NewMetrics()
		if err := gm.Register(o.reg); err != nil {
			return err
		}
		stopGW, addr, err := serveGateway(st.nc, *httpAddr, gateway.Config{TenantHeader: true, Models: st.models.paths, Logger: log, Metrics: gm})
		if err != nil {
			return err
		}
		defer stopGW(5 * time.Second)
		fmt.Fprintf(os.Stderr, "HTTP gateway on http://%s: curl -H 'X-Zerolayer-Tenant: acme' http://%s/v1/chat/completions -d '{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}'\n",
			addr, addr, st.models.models[0].Name)
	}
	if *demo {
		return runDemo(ctx, st, stdout)
	}
	fmt.Fprintf(os.Stderr, "submit with: NATS_URL=%s zerolayer submit --tenant acme --model %s --prompt \"Once upon a time\"\n", st.natsURL, st.models.models[0].Name)
	fmt.Fprintf(os.Stderr, "report with: zerolayer report --database-url '%s' --tenant acme\nCtrl-C stops.\n", redact(st.pg.url))
	<-ctx.Done()
	return nil
}

func startDev(ctx context.Context, dir string, natsPort int, dbURL string, models []string, threads int, sc *sched.Config, wm *worker.Metrics, log *slog.Logger) (_ *devStack, err error) {
	st := &devStack{}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if st.pg, err = findPostgres(ctx, dbURL, dir); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(st.pg.url)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = max(pcfg.MaxConns, 16) // ingest + River workers + reports
	if st.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, err
	}
	if _, err := migrations.Up(ctx, st.pool); err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	srv, err := startNATS(dir, natsPort)
	if err != nil {
		return nil, err
	}
	st.nats, st.natsURL = srv, srv.ClientURL()
	if st.nc, err = nats.Connect(st.natsURL, nats.Name("zerolayer dev")); err != nil {
		return nil, err
	}
	if st.js, err = jetstream.New(st.nc); err != nil {
		return nil, err
	}
	if err := contracts.EnsureStreams(ctx, st.js, contracts.StreamsConfig{}); err != nil {
		return nil, err
	}
	if st.models, err = loadModels(models, threads, 0, sc); err != nil {
		return nil, err
	}
	conc := (&observed{sched: sc}).concurrency()
	if sc == nil {
		conc = 4 // the in-order executor overlaps publishing with the next job
	}
	if st.worker, err = worker.New(st.nc, st.models.executor(), worker.Config{ID: "dev-worker", Concurrency: conc, Metrics: wm, Logger: log}); err != nil {
		return nil, err
	}
	if err := st.worker.Start(ctx); err != nil {
		return nil, err
	}
	if st.billing, err = billing.NewService(billing.Config{DB: st.pool, JetStream: st.js, Logger: log}); err != nil {
		return nil, err
	}
	if err := st.billing.Start(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// stop shuts everything down in reverse order; safe on a partial stack.
func (st *devStack) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if st.worker != nil {
		st.worker.Stop(ctx)
	}
	if st.billing != nil {
		st.billing.Stop(ctx)
	}
	if st.nc != nil {
		st.nc.Close()
	}
	if st.nats != nil {
		st.nats.Shutdown()
	}
	if st.models != nil {
		st.models.Close()
	}
	if st.pool != nil {
		st.pool.Close()
	}
	if st.pg != nil {
		st.pg.stop()
	}
}
