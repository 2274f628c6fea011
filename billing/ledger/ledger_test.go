package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// TestLedgerReplayed publishes every usage record twice under different
// message ids (a replay by an operator, or a retry past JetStream's dedupe
// window), the copies shuffled, so that a record and its copy land in one
// ingest batch or in two: each record is billed once, and the charges add
// up, in decimals, to the cost formula with the default price book over
// the records. Both ways of enqueueing the rating are covered.
func TestLedgerReplayed(t *testing.T) {
	t.Parallel()
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	records := ledgerUsage(n, 7)
	want := decimal.Zero
	for _, u := range records {
		want = want.Add(price.Cost(u, price.DefaultBook()).Total)
	}
	msgs := append(slices.Clone(records), records...)
	rand.New(rand.NewPCG(7, 13)).Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })

	for _, mode := range []struct {
		name    string
		batches bool
	}{{"per-record", false}, {"batched", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			b := startIngest(t, true, IngesterConfig{RateInBatches: mode.batches})
			start := time.Now()
			publishUsage(t, b.ns.JS, msgs, func(i int, _ contracts.Usage) string { return fmt.Sprintf("replay-%d", i) })
			billtest.Eventually(t, 5*time.Minute, func() (bool, string) {
				s := b.svc.Ingester().Stats()
				// A redelivery (an ack later than AckWait) is one more.
				return s.Stored == uint64(n) && s.Duplicates >= uint64(n), fmt.Sprintf("stats %+v", s)
			})
			t.Logf("stored after %v: %+v", time.Since(start), b.svc.Ingester().Stats())
			waitCharges(t, b.svc.cfg.DB, n, 5*time.Minute)
			t.Logf("charged after %v", time.Since(start))

			var charges, rows int
			var sum decimal.Decimal
			if err := b.svc.cfg.DB.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(total), 0), (SELECT count(*) FROM usage) FROM charges`).Scan(&charges, &sum, &rows); err != nil {
				t.Fatal(err)
			}
			if charges != n || rows != n || !sum.Equal(want) {
				t.Errorf("%d charges of %d usage rows adding up to %s; want %d adding up to %s", charges, rows, sum, n, want)
			}
			if s := b.svc.Ingester().Stats(); s.Terminated != 0 || s.Stored != uint64(n) {
				t.Errorf("stats %+v", s)
			}
			// Every record was enqueued for rating once: a job of its own,
			// or a place in one batch job.
			var enqueued int
			if err := b.svc.cfg.DB.QueryRow(t.Context(), `
				SELECT count(*) FILTER (WHERE kind = $1) + coalesce(sum(jsonb_array_length(args->'jobs')) FILTER (WHERE kind = $2), 0)
				FROM river_job`, RateArgs{}.Kind(), RateBatchArgs{}.Kind()).Scan(&enqueued); err != nil {
				t.Fatal(err)
			}
			if enqueued != n {
				t.Errorf("%d records enqueued for rating, want %d", enqueued, n)
			}
		})
	}
}

// TestIngestBatchWithRejectedRecord: a record the database rejects fails
// the statement of its whole batch; the batch is stored again a record at
// a time, so that only that record is terminated, as is an undecodable
// message beside them.
func TestIngestBatchWithRejectedRecord(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	ctx := t.Context()
	if _, err := b.svc.cfg.DB.Exec(ctx, `ALTER TABLE usage ADD CONSTRAINT no_rejects CHECK (job_id <> 'reject-me')`); err != nil {
		t.Fatal(err)
	}
	// Stopped, the ingester finds the messages waiting together.
	if err := b.svc.Ingester().Stop(ctx); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 8, 9, 0, 0, 0, time.UTC)
	for i, id := range []string{"keep-1", "reject-me", "keep-2", "keep-3"} {
		u := billtest.Usage(id, "acme", "stories260K", day.Add(time.Duration(i)*time.Minute), 10, 20, 5, 0, 0.9)
		b.publish(t, "acme", id, billtest.MustJSON(t, u))
	}
	b.publish(t, "acme", "poison", []byte("not json"))
	if err := b.svc.Ingester().Start(ctx); err != nil {
		t.Fatal(err)
	}
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		s := b.svc.Ingester().Stats()
		return s.Stored == 3 && s.Terminated == 2 && s.Retried == 0, fmt.Sprintf("stats %+v", s)
	})
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		n := b.count(t, "SELECT count(*) FROM charges")
		return n == 3, fmt.Sprintf("%d charges", n)
	})
	if n := b.count(t, "SELECT count(*) FROM usage WHERE job_id = 'reject-me'"); n != 0 {
		t.Errorf("the rejected record was stored")
	}
	if logs := b.logs.String(); !strings.Contains(logs, "no_rejects") {
		t.Errorf("the logs do not say why the record was terminated:\n%s", logs)
	}
}

// TestIngestRefusesBrokenInvariant: a record whose cached input tokens
// exceed its input tokens is terminated with the code usage_invariant,
// stored nowhere and billed nothing, while the records beside it are
// billed; the database refuses such a row too.
func TestIngestRefusesBrokenInvariant(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	ctx := t.Context()
	day := time.Date(2026, 11, 8, 9, 0, 0, 0, time.UTC)
	bad := billtest.Usage("cached-50-of-10", "acme", "stories260K", day, 10, 20, 5, 0, 0.9)
	bad.CachedInputTokens = 50
	if err := CheckUsageInvariants(bad); !errors.Is(err, contracts.CodeUsageInvariant) {
		t.Fatalf("CheckUsageInvariants: %v, want code %s", err, contracts.CodeUsageInvariant)
	}
	good := billtest.Usage("fine", "acme", "stories260K", day.Add(time.Minute), 10, 20, 5, 0, 0.9)
	good.CachedInputTokens = 10
	if err := CheckUsageInvariants(good); err != nil {
		t.Fatalf("cached = input refused: %v", err)
	}
	b.publish(t, "acme", bad.JobID, billtest.MustJSON(t, bad))
	b.publish(t, "acme", good.JobID, billtest.MustJSON(t, good))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		s := b.svc.Ingester().Stats()
		return s.Stored == 1 && s.Terminated == 1, fmt.Sprintf("stats %+v", s)
	})
	if n := b.count(t, "SELECT count(*) FROM usage WHERE job_id = 'cached-50-of-10'"); n != 0 {
		t.Errorf("the record breaking the invariant was stored")
	}
	if logs := b.logs.String(); !strings.Contains(logs, string(contracts.CodeUsageInvariant)) {
		t.Errorf("the logs do not give the code %s:\n%s", contracts.CodeUsageInvariant, logs)
	}
	// The schema's check backs the ingester's.
	_, err := insertUsages(ctx, b.svc.cfg.DB, []usageRow{{u: bad, raw: billtest.MustJSON(t, bad)}})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != "usage_cached_within_input" {
		t.Errorf("inserting the record directly: %v, want the usage_cached_within_input check", err)
	}
}
