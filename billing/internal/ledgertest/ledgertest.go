// Package ledgertest gives a test a billing database with the ledger
// running on it: a migrated schema of its own (migrations/dbtest) and a
// started River client that rates what the test stores. The tests of the
// rooms above the ledger (finance) and of the ledger's exported API use
// it; the ledger's internal tests use internal/billtest only, since this
// package imports the ledger.
package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// Bundle is a migrated schema with a started River client working the
// billing queues.
type Bundle struct {
	Pool  *pgxpool.Pool
	River *river.Client[pgx.Tx]
}

// Setup returns a fresh schema and a River client rating into it (rollups
// at once), stopped at cleanup.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	pool := dbtest.Pool(t)
	rc, err := ledger.NewRiver(pool, ledger.RiverConfig{RollupDelay: -1, Logger: billtest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rc.Stop(ctx); err != nil {
			t.Errorf("stop River: %v", err)
		}
	})
	return &Bundle{Pool: pool, River: rc}
}

// Store stores u as the ingester does: the usage row and, if new, its
// rating job, in one transaction (ledger.Record).
func (b *Bundle) Store(t testing.TB, u contracts.Usage) {
	t.Helper()
	if _, err := ledger.Record(context.Background(), b.Pool, b.River, u); err != nil {
		t.Fatal(err)
	}
}

// StoreUnrated stores u's usage row without a rating job: it stays
// unrated.
func (b *Bundle) StoreUnrated(t testing.TB, u contracts.Usage) {
	t.Helper()
	if _, err := ledger.Record(context.Background(), b.Pool, nil, u); err != nil {
		t.Fatal(err)
	}
}

// WaitCharged waits until n charges exist.
func (b *Bundle) WaitCharged(t testing.TB, n int) {
	t.Helper()
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var got int
		if err := b.Pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&got); err != nil {
			return false, err.Error()
		}
		return got == n, fmt.Sprintf("%d charges, want %d", got, n)
	})
}
