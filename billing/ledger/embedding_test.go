package ledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// TestIngestEmbeddings: embedding records through ZL_USAGE are stored
// with their kind and priced per input token at the book's embedding
// price (p_in under a book without one), in the embedding_input
// dimension, with the batch multiplier, and tagged embedding; a second
// record of the same job bills nothing more; a generation beside them is
// priced as before; the daily and batch rollups carry the embedding
// tokens and cost apart.
func TestIngestEmbeddings(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	ctx := t.Context()
	pool := b.svc.cfg.DB
	// acme's book from November: an embedding price of its own, no cached
	// price (cached tokens at p_in), batch jobs at half price.
	if err := EnsureTenant(ctx, pool, "acme", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO price_books (tenant_id, version, effective_at, currency, p_in, p_out, p_ttft, p_tool, p_embed_in, mult_batch)
		VALUES ('acme', 1, '2026-11-01T00:00:00Z', 'USD', 0.000004, 0.00002, 0.0000003, 0.0000001, 0.00000002, 0.5)`); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	// Before acme's book: the seeded default book, without an embedding
	// price, prices embeddings at p_in.
	old := billtest.EmbeddingUsage("emb-old", "acme", "bge", time.Date(2026, 10, 20, 8, 0, 0, 0, time.UTC), 1234)
	emb1 := billtest.EmbeddingUsage("emb-1", "acme", "bge", day, 5000)
	emb2 := billtest.EmbeddingUsage("emb-2", "acme", "bge", day.Add(time.Hour), 3000)
	emb2.BatchID, emb2.CustomID = "b1", "line-1"
	gen := billtest.Usage("gen-1", "acme", "bge", day.Add(2*time.Hour), 100, 20, 60, 0, 0.5)
	for _, u := range []contracts.Usage{old, emb1, emb2, gen} {
		b.publish(t, u.Tenant, u.JobID, billtest.MustJSON(t, u))
	}
	// emb-1 again under another message id, with other figures: the first
	// record wins.
	again := emb1
	again.InputTokens = 999_999
	b.publish(t, "acme", "emb-1-again", billtest.MustJSON(t, again))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		s := b.svc.Ingester().Stats()
		return s.Stored == 4 && s.Duplicates == 1, fmt.Sprintf("stats %+v", s)
	})
	waitCharges(t, pool, 4, 20*time.Second)
	if n := b.count(t, "SELECT count(*) FROM charges"); n != 4 {
		t.Fatalf("%d charges, want 4", n)
	}

	for _, tc := range []struct {
		u    contracts.Usage
		want price.Breakdown
		hand price.Breakdown
		kind string
		tags []string
	}{
		// 1234 × 0.000003 (p_in of the default book).
		{old, price.Breakdown{EmbeddingInput: dec("0.003702"), Total: dec("0.003702")},
			billtest.HandCost(old, "0.000003", "0.000015", "0.0000002", "0.0000001"), "embedding", []string{"embedding"}},
		// 5000 × 0.00000002.
		{emb1, price.Breakdown{EmbeddingInput: dec("0.0001"), Total: dec("0.0001")},
			billtest.HandCostFull(emb1, "0.000004", "0.000004", "0.00000002", "0.00002", "0.0000003", "0.0000001", "1"), "embedding", []string{"embedding"}},
		// 3000 × 0.00000002 × 0.5 (a job of a batch).
		{emb2, price.Breakdown{EmbeddingInput: dec("0.00003"), Total: dec("0.00003")},
			billtest.HandCostFull(emb2, "0.000004", "0.000004", "0.00000002", "0.00002", "0.0000003", "0.0000001", "0.5"), "embedding", []string{"embedding"}},
		// 50 uncached and 50 cached × 0.000004, 20 × 0.00002, 60 × 0.0000003,
		// nothing at the embedding price.
		{gen, price.Breakdown{Input: dec("0.0002"), CachedInput: dec("0.0002"), Output: dec("0.0004"), TTFT: dec("0.000018"), Total: dec("0.000818")},
			billtest.HandCostFull(gen, "0.000004", "0.000004", "0.00000002", "0.00002", "0.0000003", "0.0000001", "1"), "generation", []string{"high_latency_risk"}},
	} {
		c, err := GetCharge(ctx, pool, tc.u.Tenant, tc.u.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Cost.Equal(tc.want) || !c.Cost.Equal(tc.hand) {
			t.Errorf("%s: charge %+v\nwant %+v\nby hand %+v", tc.u.JobID, c.Cost, tc.want, tc.hand)
		}
		if !slices.Equal(c.Tags, tc.tags) {
			t.Errorf("%s: tags %v, want %v", tc.u.JobID, c.Tags, tc.tags)
		}
		var kind string
		if err := pool.QueryRow(ctx, `SELECT kind FROM usage WHERE tenant_id = $1 AND job_id = $2`, tc.u.Tenant, tc.u.JobID).Scan(&kind); err != nil {
			t.Fatal(err)
		}
		if kind != tc.kind {
			t.Errorf("%s: stored kind %q, want %q", tc.u.JobID, kind, tc.kind)
		}
		if stored, err := GetUsage(ctx, pool, tc.u.Tenant, tc.u.JobID); err != nil || stored.Kind != tc.u.Kind || stored.InputTokens != tc.u.InputTokens {
			t.Errorf("%s: stored record %+v, %v", tc.u.JobID, stored, err)
		}
	}

	// The rollups: the day's embedding tokens (a part of its input
	// tokens) and their cost apart.
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		days, err := DailyTotals(ctx, pool, "acme", "2026-11-05", "2026-11-06")
		if err != nil {
			return false, err.Error()
		}
		if len(days) != 1 {
			return false, fmt.Sprintf("%+v", days)
		}
		d := days[0]
		return d.Jobs == 3 && d.InputTokens == 8100 && d.EmbeddingInputTokens == 8000 && d.Cost.EmbeddingInput.Equal(dec("0.00013")) &&
			d.Cost.Input.Equal(dec("0.0002")) && d.Cost.Total.Equal(dec("0.000948")), fmt.Sprintf("%+v", d)
	})
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		bs, err := BatchTotals(ctx, pool, "acme")
		if err != nil {
			return false, err.Error()
		}
		return len(bs) == 1 && bs[0].EmbeddingInputTokens == 3000 && bs[0].Cost.EmbeddingInput.Equal(dec("0.00003")) &&
			bs[0].Cost.Total.Equal(dec("0.00003")), fmt.Sprintf("%+v", bs)
	})
}

// TestEmbeddingTagMetric: embedding_input_tokens is an embedding job's
// input tokens and 0 for a generation, so that a rule on it picks out
// embedding jobs, alone (the default embedding tag) or beside another
// metric; the rules in the database may use it.
func TestEmbeddingTagMetric(t *testing.T) {
	t.Parallel()
	gen := contracts.Usage{InputTokens: 500, TotalMs: 900}
	emb := contracts.Usage{Kind: contracts.KindEmbedding, InputTokens: 500, TotalMs: 900}
	if v, _ := MetricEmbeddingInputTokens.Value(gen); !v.IsZero() {
		t.Errorf("a generation's embedding_input_tokens = %s", v)
	}
	if v, _ := MetricEmbeddingInputTokens.Value(emb); !v.Equal(dec("500")) {
		t.Errorf("an embedding's embedding_input_tokens = %s", v)
	}
	if got := Tags(emb, DefaultTagRules()); !slices.Equal(got, []string{"embedding"}) {
		t.Errorf("default tags of an embedding: %v", got)
	}
	if got := Tags(gen, DefaultTagRules()); len(got) != 0 {
		t.Errorf("default tags of a generation: %v", got)
	}
	slow, err := ParseTagRule("acme", "slow_embedding", "total_ms > 500")
	if err != nil {
		t.Fatal(err)
	}
	isEmb, err := ParseTagRule("acme", "slow_embedding", "embedding_input_tokens>0")
	if err != nil {
		t.Fatal(err)
	}
	rules := []TagRule{slow, isEmb}
	if got := Tags(emb, rules); !slices.Equal(got, []string{"slow_embedding"}) {
		t.Errorf("slow embedding: %v", got)
	}
	if got := Tags(gen, rules); len(got) != 0 {
		t.Errorf("a slow generation is no slow embedding: %v", got)
	}
	pool := dbtest.Pool(t)
	if err := SetTagRules(t.Context(), pool, "acme", "slow_embedding", rules); err != nil {
		t.Fatalf("the database refuses a rule on embedding_input_tokens: %v", err)
	}
}
