package billing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/shopspring/decimal"
	"go.uber.org/goleak"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// eventually polls cond every 20ms until it returns true, failing the test
// with cond's last message after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %s", timeout, msg)
		}
		<-tick.C
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// dbBundle is a migrated schema with a started River client working the
// billing queue.
type dbBundle struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
}

// setupDB returns a fresh schema and a River client rating into it,
// stopped at cleanup.
func setupDB(t *testing.T) *dbBundle {
	t.Helper()
	pool := dbtest.Pool(t)
	rc, err := NewRiver(pool, RiverConfig{RollupDelay: -1, Logger: discardLogger()})
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
	return &dbBundle{pool: pool, river: rc}
}

// store stores u as the ingester does: the usage row and, if new, its
// rating job, in one transaction.
func (b *dbBundle) store(t *testing.T, u contracts.Usage) {
	t.Helper()
	raw := mustJSON(t, u)
	err := pgx.BeginFunc(t.Context(), b.pool, func(tx pgx.Tx) error {
		ok, err := insertUsage(t.Context(), tx, u, raw, 0)
		if err != nil || !ok {
			return err
		}
		_, err = b.river.InsertTx(t.Context(), tx, RateArgs{Tenant: u.Tenant, JobID: u.JobID}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitCharged waits until n charges exist.
func (b *dbBundle) waitCharged(t *testing.T, n int) {
	t.Helper()
	eventually(t, 20*time.Second, func() (bool, string) {
		var got int
		if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM charges").Scan(&got); err != nil {
			return false, err.Error()
		}
		return got == n, fmt.Sprintf("%d charges, want %d", got, n)
	})
}

// usage returns a valid usage record with the given figures.
func usage(jobID, tenant, model string, created time.Time, in, out int, ttft, tool, confidence float64) contracts.Usage {
	return contracts.Usage{
		JobID: jobID, Tenant: tenant, Model: model,
		Priority: contracts.PriorityNormal, Bucket: contracts.BucketShort, Status: contracts.StatusCompleted,
		InputTokens: in, OutputTokens: out, CachedInputTokens: in / 2,
		QueueMs: 1.5, TimeToFirstTokenMs: ttft, TimePerTokenMs: 2.25, InterTokenMsP50: 2, InterTokenMsP99: 4.5,
		TotalMs: ttft + 100, ToolExecutionTimeMs: tool, MemoryAllocatedMB: 3.5,
		Attempt: 1, WorkerID: "w1", Device: "cpu", Confidence: confidence,
		CreatedAt: created.UTC(), FinishedAt: created.Add(time.Second).UTC(),
	}
}

// handCost prices u the long way, independently of Cost: each quantity
// from its shortest decimal text, times prices given as text, cached input
// tokens at the input price (a book without a cached-input price), no
// multiplier.
func handCost(u contracts.Usage, pIn, pOut, pTTFT, pTool string) Breakdown {
	return handCostFull(u, pIn, pIn, pOut, pTTFT, pTool, "1")
}

// handCostFull is handCost with a cached-input price and a multiplier.
func handCostFull(u contracts.Usage, pIn, pCached, pOut, pTTFT, pTool, mult string) Breakdown {
	d := decimal.RequireFromString
	ms := func(f float64) decimal.Decimal { return d(strconv.FormatFloat(f, 'f', -1, 64)) }
	m := d(mult)
	b := Breakdown{
		Input:       d(strconv.Itoa(u.InputTokens - u.CachedInputTokens)).Mul(d(pIn)).Mul(m),
		CachedInput: d(strconv.Itoa(u.CachedInputTokens)).Mul(d(pCached)).Mul(m),
		Output:      d(strconv.Itoa(u.OutputTokens)).Mul(d(pOut)).Mul(m),
		TTFT:        ms(u.TimeToFirstTokenMs).Mul(d(pTTFT)).Mul(m),
		Tool:        ms(u.ToolExecutionTimeMs).Mul(d(pTool)).Mul(m),
	}
	b.Total = b.Input.Add(b.CachedInput).Add(b.Output).Add(b.TTFT).Add(b.Tool)
	return b
}

// defaultHandCost is handCost with DESIGN.md's default prices.
func defaultHandCost(u contracts.Usage) Breakdown {
	return handCost(u, "0.000003", "0.000015", "0.0000002", "0.0000001")
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
