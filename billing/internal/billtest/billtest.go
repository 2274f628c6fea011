// Package billtest holds the helpers the tests of billing's packages
// share: usage records, the cost formula worked by hand, polling. It
// imports price and contracts, never the ledger, so that the ledger's own
// tests can use it; internal/ledgertest builds on it with a database.
package billtest

import (
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// Eventually polls cond every 20ms until it returns true, failing the
// test with cond's last message after timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
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

// DiscardLogger is a logger that writes nothing.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Usage returns a valid usage record with the given figures.
func Usage(jobID, tenant, model string, created time.Time, in, out int, ttft, tool, confidence float64) contracts.Usage {
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

// HandCost prices u the long way, independently of price.Cost: each
// quantity from its shortest decimal text, times prices given as text,
// cached input tokens at the input price (a book without a cached-input
// price), no multiplier.
func HandCost(u contracts.Usage, pIn, pOut, pTTFT, pTool string) price.Breakdown {
	return HandCostFull(u, pIn, pIn, pOut, pTTFT, pTool, "1")
}

// HandCostFull is HandCost with a cached-input price and a multiplier.
func HandCostFull(u contracts.Usage, pIn, pCached, pOut, pTTFT, pTool, mult string) price.Breakdown {
	d := decimal.RequireFromString
	ms := func(f float64) decimal.Decimal { return d(strconv.FormatFloat(f, 'f', -1, 64)) }
	m := d(mult)
	b := price.Breakdown{
		Input:       d(strconv.Itoa(u.InputTokens - u.CachedInputTokens)).Mul(d(pIn)).Mul(m),
		CachedInput: d(strconv.Itoa(u.CachedInputTokens)).Mul(d(pCached)).Mul(m),
		Output:      d(strconv.Itoa(u.OutputTokens)).Mul(d(pOut)).Mul(m),
		TTFT:        ms(u.TimeToFirstTokenMs).Mul(d(pTTFT)).Mul(m),
		Tool:        ms(u.ToolExecutionTimeMs).Mul(d(pTool)).Mul(m),
	}
	b.Total = b.Input.Add(b.CachedInput).Add(b.Output).Add(b.TTFT).Add(b.Tool)
	return b
}

// DefaultHandCost is HandCost with DESIGN.md's default prices.
func DefaultHandCost(u contracts.Usage) price.Breakdown {
	return HandCost(u, "0.000003", "0.000015", "0.0000002", "0.0000001")
}

// MustJSON marshals v, failing the test if it cannot.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
