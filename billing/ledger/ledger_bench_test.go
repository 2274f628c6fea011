package ledger

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

var ledgerRecords = flag.Int("ledger.records", 20_000, "BenchmarkLedger: usage records published before billing starts")

// ledgerUsage returns n usage records as a busy deployment makes them:
// eight tenants, three models, created over three UTC days, one in four in
// a batch (of its tenant), figures spread on both sides of the tag
// thresholds. The same seed gives the same records.
func ledgerUsage(n int, seed uint64) []contracts.Usage {
	rng := rand.New(rand.NewPCG(seed, 0x1ed9e7))
	day := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)
	models := []string{"stories260K", "stories15M", "tinyllama"}
	out := make([]contracts.Usage, n)
	for i := range out {
		tenant := fmt.Sprintf("tenant-%d", rng.IntN(8))
		created := day.Add(time.Duration(rng.Int64N(int64(72 * time.Hour))))
		u := billtest.Usage(fmt.Sprintf("job-%06d", i), tenant, models[rng.IntN(len(models))], created,
			1+rng.IntN(4000), rng.IntN(600), float64(rng.IntN(20000))/128, float64(rng.IntN(400))/64, float64(rng.IntN(1001))/1000)
		if i%4 == 0 {
			u.BatchID, u.CustomID = fmt.Sprintf("batch-%d", rng.IntN(16)), fmt.Sprintf("line-%d", i)
		}
		out[i] = u
	}
	return out
}

// publishUsage publishes every record on its tenant's usage subject, the
// i-th under Nats-Msg-Id msgID(i, record), and waits for JetStream to have
// stored them all.
func publishUsage(tb testing.TB, js jetstream.JetStream, records []contracts.Usage, msgID func(int, contracts.Usage) string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const window = 1024 // publishes awaiting their acks
	acks := make([]jetstream.PubAckFuture, 0, window)
	settle := func() {
		for _, f := range acks {
			select {
			case ack := <-f.Ok():
				if ack.Duplicate {
					tb.Fatalf("publish %s: JetStream dropped it as a duplicate", f.Msg().Header.Get(contracts.HeaderMsgID))
				}
			case err := <-f.Err():
				tb.Fatalf("publish %s: %v", f.Msg().Subject, err)
			case <-ctx.Done():
				tb.Fatal("publish: no ack within 5 minutes")
			}
		}
		acks = acks[:0]
	}
	for i, u := range records {
		msg := &nats.Msg{Subject: contracts.UsageSubject(u.Tenant), Data: billtest.MustJSON(tb, u), Header: contracts.NewHeader(u.Tenant, contracts.Traceparent{})}
		msg.Header.Set(contracts.HeaderMsgID, msgID(i, u))
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			tb.Fatal(err)
		}
		if acks = append(acks, f); len(acks) == window {
			settle()
		}
	}
	settle()
}

// byJob is the message id a worker gives a usage record.
func byJob(_ int, u contracts.Usage) string { return u.Tenant + "/" + u.JobID }

// ledgerPool is a migrated schema of its own with as many connections as
// the dev stack gives billing (16).
func ledgerPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.SchemaURL(tb, dbtest.Pool(tb)))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// BenchmarkLedger times billing alone: -ledger.records usage records
// (20,000 by default) are published to ZL_USAGE on an embedded JetStream
// server, then a billing service with its default configuration is started
// on a fresh schema, and the clock runs until every record has its charge.
// It reports records/s (ingest and rating together), with one RateArgs
// job per record (the default) and with RateInBatches. Run it once per
// measurement:
//
//	go test ./billing -run '^$' -bench Ledger -benchtime 1x -count 3
func BenchmarkLedger(b *testing.B) {
	records := ledgerUsage(*ledgerRecords, 1)
	for _, mode := range []struct {
		name    string
		batches bool
	}{{"rate=per-record", false}, {"rate=batched", true}} {
		b.Run(mode.name, func(b *testing.B) {
			var busy time.Duration
			for range b.N {
				busy += ledgerRun(b, records, IngesterConfig{RateInBatches: mode.batches})
			}
			b.ReportMetric(float64(len(records)*b.N)/busy.Seconds(), "records/s")
		})
	}
}

// ledgerRun publishes records, then times a billing service with ic until
// every record is charged.
func ledgerRun(b *testing.B, records []contracts.Usage, ic IngesterConfig) time.Duration {
	b.StopTimer()
	ns := natstest.Run(b)
	if err := contracts.EnsureStreams(context.Background(), ns.JS, contracts.StreamsConfig{}); err != nil {
		b.Fatal(err)
	}
	publishUsage(b, ns.JS, records, byJob)
	pool := ledgerPool(b)
	svc, err := NewService(Config{DB: pool, JetStream: ns.JS, Logger: billtest.DiscardLogger(), Ingester: ic})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	waitCharges(b, pool, len(records), 30*time.Minute)
	busy := time.Since(start)
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		b.Errorf("stop: %v", err)
	}
	return busy
}

// waitCharges polls until the charges table holds n rows.
func waitCharges(tb testing.TB, pool *pgxpool.Pool, n int, timeout time.Duration) {
	tb.Helper()
	natstest.Until(tb, timeout, fmt.Sprintf("%d charges", n), func() bool {
		var got int
		return pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&got) == nil && got >= n
	})
}
