package finance

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/internal/ledgertest"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// TestEmbeddingMonth: a month of generations and embedding jobs, some of
// one model, priority and book. The book's embedding price round-trips;
// each embedding is charged at it and a record stored twice once; the
// period report keeps embeddings apart (by kind, tokens and cost); a
// re-rating under a new version prices the embeddings at its embedding
// price; and the month's invoice has an embedding input line per group
// whose quantity is the embedding tokens only, every usage line is
// quantity × unit price, and the lines add up to the charges.
func TestEmbeddingMonth(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	embedIn, cachedIn := dec("0.00000002"), dec("0.000001")
	v1, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 11, 1), Currency: "USD",
		PIn: dec("0.000004"), POut: dec("0.00002"), PTTFT: dec("0.0000003"), PTool: dec("0.0000001"),
		PCachedIn: &cachedIn, PEmbedIn: &embedIn, MultBatch: dec("0.5")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ledger.GetPriceBook(ctx, b.Pool, v1.ID); err != nil || got.PEmbedIn == nil || !got.PEmbedIn.Equal(embedIn) ||
		!got.EmbeddingInputPrice().Equal(embedIn) {
		t.Fatalf("stored book %+v, %v", got, err)
	}
	day := date(2026, 11, 3).Add(9 * time.Hour)
	gen1 := billtest.Usage("gen-1", "acme", "qwen3", day, 400, 50, 12.5, 0, 0.9)
	gen2 := billtest.Usage("gen-2", "acme", "qwen3", day.Add(time.Hour), 1000, 300, 80, 2.5, 0.97)
	gen2.Priority = contracts.PriorityHigh
	emb1 := billtest.EmbeddingUsage("emb-1", "acme", "qwen3", day.Add(2*time.Hour), 5000) // one group with gen-1
	emb2 := billtest.EmbeddingUsage("emb-2", "acme", "bge", day.Add(3*time.Hour), 12345)
	emb3 := billtest.EmbeddingUsage("emb-3", "acme", "bge", day.Add(4*time.Hour), 7000)
	emb3.BatchID, emb3.CustomID = "nightly", "chunk-1"
	records := []contracts.Usage{gen1, gen2, emb1, emb2, emb3}
	for _, u := range records {
		b.Store(t, u)
	}
	// The same embedding job stored again: not stored, not billed.
	again := emb2
	again.InputTokens = 1
	if stored, err := ledger.Record(ctx, b.Pool, b.River, again); err != nil || stored {
		t.Fatalf("second record of emb-2: stored %v, %v", stored, err)
	}
	b.WaitCharged(t, len(records))

	hand := func(u contracts.Usage, pIn, pCached, pEmbed, pOut, pTTFT, pTool string) price.Breakdown {
		m := "1"
		if u.BatchID != "" {
			m = "0.5"
		}
		return billtest.HandCostFull(u, pIn, pCached, pEmbed, pOut, pTTFT, pTool, m)
	}
	checkCharges := func(book price.Book, pIn, pEmbed string) decimal.Decimal {
		t.Helper()
		sum := decimal.Zero
		for _, u := range records {
			c, err := ledger.GetCharge(ctx, b.Pool, u.Tenant, u.JobID)
			if err != nil {
				t.Fatal(err)
			}
			want := hand(u, pIn, "0.000001", pEmbed, "0.00002", "0.0000003", "0.0000001")
			if c.PriceBookID != book.ID || !c.Cost.Equal(want) {
				t.Errorf("%s: charge by pb%d %+v\nwant by pb%d %+v", u.JobID, c.PriceBookID, c.Cost, book.ID, want)
			}
			if u.Kind == contracts.KindEmbedding && (!c.Cost.Input.IsZero() || !c.Cost.CachedInput.IsZero() || !slices.Contains(c.Tags, "embedding")) {
				t.Errorf("%s: an embedding charged %+v, tags %v", u.JobID, c.Cost, c.Tags)
			}
			sum = sum.Add(c.Cost.Total)
		}
		return sum
	}
	// 5000 × 0.00000002 = 0.0001; 12345 × 0.00000002 = 0.0002469;
	// 7000 × 0.00000002 × 0.5 = 0.00007.
	if c, _ := ledger.GetCharge(ctx, b.Pool, "acme", "emb-2"); !c.Cost.EmbeddingInput.Equal(dec("0.0002469")) || !c.Cost.Total.Equal(dec("0.0002469")) {
		t.Errorf("emb-2: %+v, want 0.0002469 of embedding input", c.Cost)
	}
	sum := checkCharges(v1, "0.000004", "0.00000002")

	r, err := BuildPeriodReport(ctx, b.Pool, "acme", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	embTokens := int64(emb1.InputTokens + emb2.InputTokens + emb3.InputTokens)
	if !r.Total.Cost.Total.Equal(sum) || r.Total.EmbeddingInputTokens != embTokens || !r.Total.Cost.EmbeddingInput.Equal(dec("0.0004169")) {
		t.Errorf("report total %+v, want %s with %d embedding tokens costing 0.0004169", r.Total, sum, embTokens)
	}
	kinds := map[string]Group{}
	for _, g := range r.ByKind {
		kinds[g.Key] = g
	}
	if e, g := kinds["embedding"], kinds["generation"]; len(r.ByKind) != 2 || e.Jobs != 3 || e.EmbeddingInputTokens != embTokens ||
		e.InputTokens != embTokens || !e.Cost.Total.Equal(e.Cost.EmbeddingInput) || g.Jobs != 2 || g.EmbeddingInputTokens != 0 ||
		!g.Cost.EmbeddingInput.IsZero() || !e.Cost.Total.Add(g.Cost.Total).Equal(sum) {
		t.Errorf("report by kind %+v", r.ByKind)
	}
	var table bytes.Buffer
	if err := r.Write(&table, FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"24345 of embeddings", "embedding input", "embedding"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("report table lacks %q:\n%s", want, table.String())
		}
	}

	// A new version of the same month: embeddings at 0.00000003, input at
	// 0.000005. A dry run, then the re-rating of the month.
	embedIn2 := dec("0.00000003")
	v2, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "acme", EffectiveAt: date(2026, 11, 1), Currency: "USD",
		PIn: dec("0.000005"), POut: dec("0.00002"), PTTFT: dec("0.0000003"), PTool: dec("0.0000001"),
		PCachedIn: &cachedIn, PEmbedIn: &embedIn2, MultBatch: dec("0.5"), Note: "embeddings up"})
	if err != nil {
		t.Fatal(err)
	}
	args := ledger.RerateRangeArgs{Tenant: "acme", Period: "2026-11", By: "test"}
	dry, err := ledger.DryRerate(ctx, b.Pool, args)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Changed != 5 || !dry.Before.EmbeddingInput.Equal(dec("0.0004169")) || !dry.After.EmbeddingInput.Equal(dec("0.00062535")) {
		t.Errorf("dry re-rating %+v", dry)
	}
	res, err := b.River.Insert(ctx, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if row := waitJob(t, b, res.Job.ID); row.State != rivertype.JobStateCompleted {
		t.Fatalf("re-rating %s: %v", row.State, row.Errors)
	}
	sum = checkCharges(v2, "0.000005", "0.00000003")
	var history int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM charge_history WHERE cost_embedding_input > 0`).Scan(&history); err != nil || history != 3 {
		t.Errorf("%d replaced embedding charges kept with their embedding cost, want 3 (%v)", history, err)
	}

	// The month's invoice.
	if err := SetSupplier(ctx, b.Pool, testSupplier, "test"); err != nil {
		t.Fatal(err)
	}
	invs, err := CloseInvoice(ctx, b.Pool, CloseRequest{Tenant: "acme", Period: "2026-11", By: "test", Now: date(2026, 12, 1).Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	inv := invs[0]
	if len(invs) != 1 || !inv.Subtotal.Equal(sum) || inv.Jobs != int64(len(records)) {
		t.Fatalf("invoice subtotal %s for %d jobs, want %s for %d", inv.Subtotal, inv.Jobs, sum, len(records))
	}
	type key struct{ model, dim string }
	lines := map[key]InvoiceLine{}
	for _, l := range inv.Lines {
		if l.Kind != LineUsage {
			continue
		}
		if !l.Quantity.Mul(l.UnitPrice).Equal(l.Amount) {
			t.Errorf("line %q: %s × %s ≠ %s", l.Description, l.Quantity, l.UnitPrice, l.Amount)
		}
		if l.Priority == "normal" {
			lines[key{l.Model + map[bool]string{true: "/batch"}[l.Batch], l.Dimension}] = l
		}
	}
	for _, c := range []struct {
		model, dim, quantity, unitPrice, desc string
	}{
		// qwen3, normal: gen-1's 200 uncached input tokens, not emb-1's 5000.
		{"qwen3", DimInput, "200", "0.000005", "qwen3, normal priority: input tokens"},
		{"qwen3", DimEmbeddingInput, "5000", "0.00000003", "qwen3, normal priority: embedding input tokens"},
		{"bge", DimEmbeddingInput, "12345", "0.00000003", "bge, normal priority: embedding input tokens"},
		{"bge/batch", DimEmbeddingInput, "7000", "0.000000015", "bge, normal priority, batch: embedding input tokens"},
	} {
		l, ok := lines[key{c.model, c.dim}]
		if !ok || !l.Quantity.Equal(dec(c.quantity)) || !l.UnitPrice.Equal(dec(c.unitPrice)) || l.Description != c.desc || l.Unit != "tokens" {
			t.Errorf("%s %s line: %+v; want %s tokens at %s, %q", c.model, c.dim, l, c.quantity, c.unitPrice, c.desc)
		}
	}
	if _, ok := lines[key{"bge", DimInput}]; ok {
		t.Errorf("bge, with embeddings only, has an input line")
	}
	var page bytes.Buffer
	if err := inv.Write(&page, FormatHTML); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "embedding input tokens") {
		t.Error("the invoice page has no embedding input line")
	}
}

// TestEmbeddingWithoutOwnPrice: under a book without an embedding price
// (every book stored before there was one), an embedding is priced at
// p_in, in its own dimension, and invoiced on its own line at p_in; a
// generation is priced as it always was.
func TestEmbeddingWithoutOwnPrice(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := context.Background()
	day := date(2026, 11, 3)
	emb := billtest.EmbeddingUsage("emb", "acme", "bge", day, 2500)
	gen := billtest.Usage("gen", "acme", "bge", day, 300, 40, 20, 1.5, 0.9)
	b.Store(t, emb)
	b.Store(t, gen)
	b.WaitCharged(t, 2)
	c, err := ledger.GetCharge(ctx, b.Pool, "acme", "emb")
	if err != nil {
		t.Fatal(err)
	}
	// 2500 × 0.000003.
	if !c.Cost.Equal(price.Breakdown{EmbeddingInput: dec("0.0075"), Total: dec("0.0075")}) || c.PriceBookVersion != 1 {
		t.Errorf("embedding under the default book: %+v", c)
	}
	if g, err := ledger.GetCharge(ctx, b.Pool, "acme", "gen"); err != nil || !g.Cost.Equal(billtest.DefaultHandCost(gen)) {
		t.Errorf("generation under the default book: %+v, want %+v (%v)", g.Cost, billtest.DefaultHandCost(gen), err)
	}
	if err := SetSupplier(ctx, b.Pool, testSupplier, "test"); err != nil {
		t.Fatal(err)
	}
	invs, err := CloseInvoice(ctx, b.Pool, CloseRequest{Tenant: "acme", Period: "2026-11", By: "test", Now: date(2026, 12, 1).Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range invs[0].Lines {
		if l.Dimension == DimEmbeddingInput {
			found = l.Quantity.Equal(dec("2500")) && l.UnitPrice.Equal(dec("0.000003")) && l.Amount.Equal(dec("0.0075"))
		}
		if l.Dimension == DimInput && !l.Quantity.Equal(dec("150")) {
			t.Errorf("input line %+v counts the embedding's tokens", l)
		}
	}
	if !found {
		t.Errorf("no embedding line of 2500 tokens at 0.000003: %+v", invs[0].Lines)
	}
}
