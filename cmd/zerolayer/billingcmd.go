package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/queuemetrics"
	"github.com/zerolayer/zerolayer/ops/devstack"
)

func runBilling(ctx context.Context, args []string) error {
	fs := newFlags("billing")
	nf := addNATSFlag(fs)
	dbURL := addDatabaseFlag(fs, ", migrated with 'zerolayer migrate up'")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long in-flight work may finish")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9402)")
	provision := fs.Bool("provision", false, "create the streams if ZL_USAGE does not exist (else wait for a worker to)")
	replicas := fs.Int("replicas", 1, "stream replicas when provisioning (3 in production)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	var rd readiness
	rd.waiting("connecting to PostgreSQL and NATS")
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, reg, &rd)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := nf.connect("billing", nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	svc, err := ledger.NewService(ledger.Config{DB: pool, JetStream: js, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Ingester: ledger.IngesterConfig{Provision: *provision, Streams: contracts.StreamsConfig{Replicas: *replicas}, RateInBatches: true}})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	reg.MustRegister(ledger.NewCollector(svc), queuemetrics.NewCollector(js, contracts.StreamUsage))
	rd.check(func() error { return billingReady(ctx, nc, pool) })
	fmt.Fprintf(stderr, "billing: ingesting usage from %s into %s\n", nc.ConnectedUrlRedacted(), devstack.Redact(cmp.Or(*dbURL, os.Getenv("DATABASE_URL"))))
	<-ctx.Done()
	rd.waiting("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	return svc.Stop(sctx)
}

// billingReady is nil while billing's NATS connection is up and
// PostgreSQL answers a ping within two seconds.
func billingReady(ctx context.Context, nc *nats.Conn, pool *pgxpool.Pool) error {
	if st := nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("NATS connection %s", st)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	return nil
}
