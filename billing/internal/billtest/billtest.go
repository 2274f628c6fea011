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

// EmbeddingUsage returns a valid usage record of an embedding job
// (contracts.KindEmbedding) whose inputs came to in tokens: nothing
// generated, no time to first token, nothing cached.
func EmbeddingUsage(jobID, tenant, model string, created time.Time, in int) contracts.Usage {
	u := Usage(jobID, tenant, model, created, in, 0, 0, 0, 0)
	u.Kind, u.CachedInputTokens = contracts.KindEmbedding, 0
	u.TimePerTokenMs, u.InterTokenMsP50, u.InterTokenMsP99 = 0, 0, 0
	return u
}

// HandCost prices u the long way, independently of price.Cost: each
// quantity from its shortest decimal text, times prices given as text,
// cached and embedding input tokens at the input price (a book without
// prices of their own), no multiplier.
func HandCost(u contracts.Usage, pIn, pOut, pTTFT, pTool string) price.Breakdown {
	return HandCostFull(u, pIn, pIn, pIn, pOut, pTTFT, pTool, "1")
}

// HandCostFull is HandCost with a cached-input price, an embedding-input
// price and a multiplier. An embedding job's input tokens are all priced
// at pEmbed, in EmbeddingInput; a generation's at pIn and pCached.
func HandCostFull(u contracts.Usage, pIn, pCached, pEmbed, pOut, pTTFT, pTool, mult string) price.Breakdown {
	d := decimal.RequireFromString
	ms := func(f float64) decimal.Decimal { return d(strconv.FormatFloat(f, 'f', -1, 64)) }
	m := d(mult)
	b := price.Breakdown{
		Input:          d(strconv.Itoa(u.InputTokens - u.CachedInputTokens)).Mul(d(pIn)).Mul(m),
		CachedInput:    d(strconv.Itoa(u.CachedInputTokens)).Mul(d(pCached)).Mul(m),
		EmbeddingInput: decimal.Zero,
		Output:         d(strconv.Itoa(u.OutputTokens)).Mul(d(pOut)).Mul(m),
		TTFT:           ms(u.TimeToFirstTokenMs).Mul(d(pTTFT)).Mul(m),
		Tool:           ms(u.ToolExecutionTimeMs).Mul(d(pTool)).Mul(m),
	}
	if u.Kind == contracts.KindEmbedding {
		b.Input, b.CachedInput = decimal.Zero, decimal.Zero
		b.EmbeddingInput = d(strconv.Itoa(u.InputTokens)).Mul(d(pEmbed)).Mul(m)
	}
	b.Total = b.Input.Add(b.CachedInput).Add(b.EmbeddingInput).Add(b.Output).Add(b.TTFT).Add(b.Tool)
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
