package finance

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/billing/internal/ledgertest"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

func TestReport(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	from, to := date(2026, 11, 1), date(2026, 12, 1)
	in, stored := storeReportUsage(t, b, from, to)
	r, err := BuildReport(ctx, b.Pool, "acme", from, to)
	if err != nil {
		t.Fatal(err)
	}
	var sum decimal.Decimal // of the charges table
	if err := b.Pool.QueryRow(ctx, `SELECT sum(c.total) FROM charges c JOIN usage u USING (tenant_id, job_id)
		WHERE u.tenant_id = 'acme' AND u.created_at >= $1 AND u.created_at < $2`, from, to).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	t.Run("totals", func(t *testing.T) { checkReportTotals(t, r, in, sum) })
	t.Run("splits", func(t *testing.T) { checkReportSplits(t, r, in) })
	t.Run("json", func(t *testing.T) { checkReportJSON(t, r, from) })
	t.Run("csv", func(t *testing.T) { checkReportCSV(t, r, sum) })
	t.Run("table and html", func(t *testing.T) { checkReportTableHTML(t, r) })
	t.Run("periods", func(t *testing.T) {
		// An empty period is an empty report, not an error.
		empty, err := BuildReport(ctx, b.Pool, "acme", date(2020, 1, 1), date(2020, 2, 1))
		if err != nil || empty.Total.Jobs != 0 || !empty.Total.Cost.Total.IsZero() || empty.Currency != "" {
			t.Errorf("empty report %+v, %v", empty, err)
		}
		if _, err := BuildReport(ctx, b.Pool, "acme", to, from); err == nil {
			t.Error("reversed period accepted")
		}
	})
	t.Run("mixed currencies", func(t *testing.T) {
		// A currency changes at the start of a month only; a period
		// with charges in two currencies is refused.
		eur := price.Book{Tenant: "acme", EffectiveAt: date(2026, 11, 20), Currency: "EUR",
			PIn: dec("0.000002"), POut: dec("0.00001"), PTTFT: dec("0"), PTool: dec("0")}
		if _, err := CreatePriceBook(ctx, b.Pool, eur); !errors.Is(err, ErrCurrencyChange) {
			t.Fatalf("EUR from 20 November: %v, want ErrCurrencyChange", err)
		}
		eur.EffectiveAt = date(2026, 12, 1)
		if _, err := CreatePriceBook(ctx, b.Pool, eur); err != nil {
			t.Fatal(err)
		}
		b.Store(t, billtest.Usage("dec-eur", "acme", "m1", date(2026, 12, 5), 10, 10, 1, 0, 0.5))
		b.WaitCharged(t, stored+1)
		// In a REPEATABLE READ transaction the report is one snapshot.
		err := pgx.BeginTxFunc(ctx, b.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			_, err := BuildReport(ctx, tx, "acme", from, date(2027, 1, 1))
			return err
		})
		if !errors.Is(err, ErrMixedCurrency) {
			t.Errorf("two currencies: %v, want ErrMixedCurrency", err)
		}
	})
}

// storeReportUsage stores and rates the report's usage records: in the
// period, eight jobs of acme over two models, the three priorities and
// buckets, with and without tags (returned); outside it, one just before,
// one at the end (excluded) and one of another tenant; and one record of
// acme stored but not rated (no rating job). stored counts the rated.
func storeReportUsage(t *testing.T, b *ledgertest.Bundle, from, to time.Time) (in []contracts.Usage, stored int) {
	t.Helper()
	for i := range 8 {
		u := billtest.Usage(fmt.Sprintf("nov-%d", i), "acme", []string{"m1", "m2"}[i%2], from.Add(time.Duration(i)*73*time.Hour),
			50+i*111, 120+i*29, 20+float64(i)*9.5, float64(i)*0.25, 0.93+float64(i)*0.007)
		u.Priority = contracts.Priorities()[i%3]
		u.Bucket = contracts.AllBuckets()[(i/2)%3]
		in = append(in, u)
	}
	// Outside it: just before, at the end (excluded), another tenant.
	out := []contracts.Usage{
		billtest.Usage("oct", "acme", "m1", from.Add(-time.Millisecond), 999, 999, 99, 9, 0.99),
		billtest.Usage("dec", "acme", "m1", to, 999, 999, 99, 9, 0.99),
		billtest.Usage("beta-nov", "beta", "m1", from.Add(time.Hour), 999, 999, 99, 9, 0.99),
	}
	for _, u := range append(slices.Clone(in), out...) {
		b.Store(t, u)
	}
	b.WaitCharged(t, len(in)+len(out))
	// One record stored but not rated (no rating job).
	unrated := billtest.Usage("nov-unrated", "acme", "m1", from.Add(48*time.Hour), 5, 5, 5, 5, 0.5)
	b.StoreUnrated(t, unrated)
	return in, len(in) + len(out)
}

// checkReportTotals checks the report's totals against the records and
// the sum of the charges table.
func checkReportTotals(t *testing.T, r *Report, in []contracts.Usage, sum decimal.Decimal) {
	// The totals, computed here from the records …
	want := handGroup(in)
	if r.Total.Jobs != want.Jobs || r.Total.InputTokens != want.InputTokens || r.Total.OutputTokens != want.OutputTokens ||
		r.Total.CachedInputTokens != want.CachedInputTokens || !r.Total.Cost.Equal(want.Cost) {
		t.Errorf("total %+v\nwant  %+v", r.Total, want)
	}
	// … and from the charges table.
	if !r.Total.Cost.Total.Equal(sum) {
		t.Errorf("report total %s, sum of charges %s", r.Total.Cost.Total, sum)
	}
	if r.Currency != "USD" || r.Unrated != 1 || r.InvoiceTotal != price.RoundInvoice(sum, "USD").StringFixed(2) {
		t.Errorf("currency %q, unrated %d, invoice total %s", r.Currency, r.Unrated, r.InvoiceTotal)
	}
}

// checkReportSplits checks that each split adds up to the total, sorted
// by cost, and the tags.
func checkReportSplits(t *testing.T, r *Report, in []contracts.Usage) {
	want := handGroup(in)
	byTag := map[string]int64{}
	var untagged int64
	for _, u := range in {
		tags := ledger.Tags(u, ledger.DefaultTagRules())
		for _, tag := range tags {
			byTag[tag]++
		}
		if len(tags) == 0 {
			untagged++
		}
	}
	for name, groups := range map[string][]Group{"model": r.ByModel, "priority": r.ByPriority, "bucket": r.ByBucket} {
		var s Group
		for _, g := range groups {
			s.Jobs += g.Jobs
			s.OutputTokens += g.OutputTokens
			s.Cost = s.Cost.Add(g.Cost)
		}
		if s.Jobs != want.Jobs || s.OutputTokens != want.OutputTokens || !s.Cost.Equal(want.Cost) {
			t.Errorf("by %s adds up to %+v, want %+v", name, s, want)
		}
		if len(groups) < 2 {
			t.Errorf("by %s: %+v", name, groups)
		}
		for i := 1; i < len(groups); i++ {
			if groups[i].Cost.Total.GreaterThan(groups[i-1].Cost.Total) {
				t.Errorf("by %s not sorted by cost", name)
			}
		}
	}
	gotTags := map[string]int64{}
	for _, g := range r.ByTag {
		gotTags[g.Key] = g.Jobs
	}
	if fmt.Sprint(gotTags) != fmt.Sprint(byTag) || r.Untagged.Jobs != untagged {
		t.Errorf("tags %v untagged %d, want %v and %d", gotTags, r.Untagged.Jobs, byTag, untagged)
	}
	if len(byTag) == 0 || untagged == 0 {
		t.Fatalf("test data has tags %v and %d untagged jobs; want both", byTag, untagged)
	}
}

// checkReportJSON: amounts are exact strings, and the report reads back
// whole.
func checkReportJSON(t *testing.T, r *Report, from time.Time) {
	var js bytes.Buffer
	if err := r.Write(&js, FormatJSON); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), fmt.Sprintf(`"total": "%s"`, r.Total.Cost.Total)) {
		t.Errorf("JSON does not carry the total as a string:\n%s", js.String())
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !back.Total.Cost.Equal(r.Total.Cost) || len(back.ByModel) != len(r.ByModel) || !back.From.Equal(from) || back.Tenant != "acme" {
		t.Errorf("JSON round trip: %+v", back)
	}
}

// checkReportCSV: one CSV per view, each with the header, one row per
// group with exact amounts and a total row; the exact rows add up to the
// total row, which is the report's total, and so do the display amounts.
func checkReportCSV(t *testing.T, r *Report, sum decimal.Decimal) {
	col := func(name string) int { return slices.Index(CSVHeader, name) }
	for _, view := range ReportViews {
		var cs bytes.Buffer
		if err := r.WriteCSVView(&cs, view); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&cs).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(recs[0], CSVHeader) {
			t.Errorf("%s: CSV header %v", view, recs[0])
		}
		groups, _ := r.view(view)
		if len(recs) != 1+len(groups)+1 || len(groups) == 0 {
			t.Fatalf("%s: CSV has %d rows, want a header, %d groups and the total", view, len(recs), len(groups))
		}
		total := recs[len(recs)-1]
		if total[col("key")] != "total" || total[col("jobs")] != "8" || total[col("cost_total_exact")] != sum.String() ||
			total[col("cost_total")] != r.InvoiceTotal || total[col("currency")] != "USD" || total[col("from")] != "2026-11-01T00:00:00Z" {
			t.Errorf("%s: CSV total row %v, want %s (%s)", view, total, sum, r.InvoiceTotal)
		}
		var exact, shown decimal.Decimal
		for _, rec := range recs[1 : len(recs)-1] {
			exact = exact.Add(decimal.RequireFromString(rec[col("cost_total_exact")]))
			shown = shown.Add(decimal.RequireFromString(rec[col("cost_total")]))
		}
		if !exact.Equal(sum) || !shown.Equal(decimal.RequireFromString(r.InvoiceTotal)) {
			t.Errorf("%s: CSV rows add up to %s (shown %s), want %s (%s)", view, exact, shown, sum, r.InvoiceTotal)
		}
	}
	if err := r.WriteCSVView(&bytes.Buffer{}, "colour"); !errors.Is(err, ErrInvalidFormat) {
		t.Errorf("unknown view: %v", err)
	}
}

// checkReportTableHTML: the table is readable, with the total rounded
// for display and no amount with more decimals than cents.
func checkReportTableHTML(t *testing.T, r *Report) {
	var tb bytes.Buffer
	if err := r.Write(&tb, FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tenant acme", "total " + r.InvoiceTotal + " USD", "m1", "m2", "(no tag)", "high", "not yet rated 1", "pb"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	// Only the total's exact value, said as such, has more decimals.
	shown := strings.Replace(tb.String(), "exact "+r.Net.String(), "", 1)
	if long := regexp.MustCompile(`\d\.\d{3,}`).FindString(shown); long != "" {
		t.Errorf("table shows %s, more decimals than cents:\n%s", long, tb.String())
	}
	var hb bytes.Buffer
	if err := r.Write(&hb, FormatHTML); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hb.String(), "acme") {
		t.Errorf("HTML lacks the tenant")
	}
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"table", "csv", "json", "html"} {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseFormat("pdf"); !errors.Is(err, ErrInvalidFormat) {
		t.Errorf("ParseFormat(pdf): %v", err)
	}
	if err := (&Report{}).Write(&bytes.Buffer{}, "xml"); !errors.Is(err, ErrInvalidFormat) {
		t.Errorf("Write(xml): %v", err)
	}
}

// TestBatchReport bills the jobs of one batch as one: totals and lines
// computed here from the records, other batches and tenants left out, a
// record stored before rating counted as unrated, and a record stored
// before the batch columns existed (only in its raw body) found too.
func TestBatchReport(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	at := date(2026, 11, 10)
	var in []contracts.Usage
	for i := range 5 {
		u := billtest.Usage(fmt.Sprintf("b1-doc-%d", i), "acme", "m1", at.Add(time.Duration(i)*time.Minute), 40+i*10, 100+i*7, 12+float64(i), 0.5, 0.97)
		u.BatchID, u.CustomID = "b1", fmt.Sprintf("doc-%d", i)
		if i == 3 {
			u.Status = contracts.StatusCanceled
		}
		in = append(in, u)
	}
	other := billtest.Usage("b2-doc-0", "acme", "m1", at, 999, 999, 99, 9, 0.99)
	other.BatchID, other.CustomID = "b2", "doc-0"
	loose := billtest.Usage("no-batch", "acme", "m1", at, 999, 999, 99, 9, 0.99)
	beta := billtest.Usage("beta-b1-doc-0", "beta", "m1", at, 999, 999, 99, 9, 0.99)
	beta.BatchID, beta.CustomID = "b1", "doc-0"
	for _, u := range append(slices.Clone(in), other, loose, beta) {
		b.Store(t, u)
	}
	b.WaitCharged(t, len(in)+3)
	unrated := billtest.Usage("b1-doc-9", "acme", "m1", at, 5, 5, 5, 5, 0.5)
	unrated.BatchID, unrated.CustomID = "b1", "doc-9"
	b.StoreUnrated(t, unrated)
	// The rollups the ratings asked for have run (they were enqueued with
	// the charges), so none races the changes below.
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var n int
		if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'zl_billing_batch_rollup'
			AND state IN ('available', 'pending', 'running', 'scheduled', 'retryable')`).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d batch rollups pending", n)
	})
	// A record from before migration 0005: batch only in raw.
	if _, err := b.Pool.Exec(ctx, `UPDATE usage SET batch_id = NULL, custom_id = NULL WHERE job_id = 'b1-doc-4'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(ctx, `UPDATE usage SET batch_id = NULLIF(raw->>'batch_id', ''), custom_id = NULLIF(raw->>'custom_id', '') WHERE raw ? 'batch_id'`); err != nil {
		t.Fatal(err)
	}
	// Recompute b1 by hand, as an operator would after a backfill.
	if _, err := b.River.Insert(ctx, ledger.BatchRollupArgs{Tenant: "acme", Batch: "b1"}, nil); err != nil {
		t.Fatal(err)
	}

	r, err := BuildBatchReport(ctx, b.Pool, "acme", "b1")
	if err != nil {
		t.Fatal(err)
	}
	want := handGroup(in)
	if r.Total.Jobs != want.Jobs || r.Total.InputTokens != want.InputTokens || r.Total.OutputTokens != want.OutputTokens || !r.Total.Cost.Equal(want.Cost) {
		t.Errorf("total %+v\nwant  %+v", r.Total, want)
	}
	if r.Currency != "USD" || r.Unrated != 1 || len(r.Lines) != 6 {
		t.Fatalf("currency %q, unrated %d, %d lines", r.Currency, r.Unrated, len(r.Lines))
	}
	if len(r.ByStatus) != 2 || r.ByStatus[0].Key != "canceled" || r.ByStatus[0].Jobs != 1 || r.ByStatus[1].Key != "completed" || r.ByStatus[1].Jobs != 4 {
		t.Errorf("by status %+v", r.ByStatus)
	}
	var sum decimal.Decimal
	for i, l := range r.Lines {
		if i < 5 {
			u := in[i]
			if l.CustomID != u.CustomID || l.JobID != u.JobID || l.Cost == nil || !l.Cost.Equal(billtest.DefaultHandCost(u)) || l.PriceBookVersion < 1 {
				t.Errorf("line %d: %+v (cost %v), want %s costing %v", i, l, l.Cost, u.CustomID, billtest.DefaultHandCost(u))
				continue
			}
			sum = sum.Add(l.Cost.Total)
		} else if l.CustomID != "doc-9" || l.Cost != nil {
			t.Errorf("unrated line %+v", l)
		}
	}
	if !sum.Equal(r.Total.Cost.Total) {
		t.Errorf("lines add up to %s, total %s", sum, r.Total.Cost.Total)
	}
	// The batch rollup (River) keeps the same totals in usage_batches.
	var bt []ledger.BatchTotal
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var err error
		if bt, err = ledger.BatchTotals(ctx, b.Pool, "acme"); err != nil {
			return false, err.Error()
		}
		return len(bt) == 2 && bt[0].Jobs+bt[1].Jobs == 6, fmt.Sprintf("batch totals %+v", bt)
	})
	for _, x := range bt {
		switch x.Batch {
		case "b1":
			if x.Jobs != 5 || x.Completed != 4 || x.Canceled != 1 || x.InputTokens != want.InputTokens || !x.Cost.Equal(want.Cost) || x.Currency != "USD" ||
				!x.FirstCreatedAt.Equal(in[0].CreatedAt) {
				t.Errorf("b1 totals %+v\nwant %+v", x, want)
			}
		case "b2":
			if x.Jobs != 1 || !x.Cost.Equal(billtest.DefaultHandCost(other)) {
				t.Errorf("b2 totals %+v", x)
			}
		default:
			t.Errorf("unexpected batch %+v", x)
		}
	}
	if _, err := BuildBatchReport(ctx, b.Pool, "acme", ""); err == nil {
		t.Error("a report of no batch was built")
	}
	if _, err := BuildBatchReport(ctx, b.Pool, "acme", "nope"); !errors.Is(err, ErrUnknownBatch) {
		t.Errorf("an unknown batch: %v, want ErrUnknownBatch", err)
	}
}

// TestReportUnknown: a report of a tenant billing has never heard of, or of
// a batch with no usage, is an error; a known tenant without usage in the
// period (or without batches) gets an empty report.
func TestReportUnknown(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	from, to := date(2026, 11, 1), date(2026, 12, 1)
	// acme has usage in batch b1; priced has only a price book; ghost
	// has nothing.
	u := billtest.Usage("b1-doc-0", "acme", "m1", from.Add(time.Hour), 10, 10, 1, 0, 0.5)
	u.BatchID, u.CustomID = "b1", "doc-0"
	b.StoreUnrated(t, u)
	if _, err := CreatePriceBook(ctx, b.Pool, price.Book{Tenant: "priced", EffectiveAt: from, Currency: "EUR",
		PIn: dec("0.000002"), POut: dec("0.00001"), PTTFT: dec("0"), PTool: dec("0")}); err != nil {
		t.Fatal(err)
	}

	period := func(tenant string) func() error {
		return func() error { _, err := BuildReport(ctx, b.Pool, tenant, from, to); return err }
	}
	batch := func(tenant, id string) func() error {
		return func() error { _, err := BuildBatchReport(ctx, b.Pool, tenant, id); return err }
	}
	totals := func(tenant string) func() error {
		return func() error { _, err := ledger.BatchTotals(ctx, b.Pool, tenant); return err }
	}
	tests := []struct {
		name    string
		build   func() error
		wantErr error
		names   string // what the error message must quote
	}{
		{"period, tenant with usage", period("acme"), nil, ""},
		{"period, tenant with a price book only", period("priced"), nil, ""},
		{"period, unknown tenant", period("ghost"), ledger.ErrUnknownTenant, `"ghost"`},
		{"batch", batch("acme", "b1"), nil, ""},
		{"batch, unknown tenant", batch("ghost", "b1"), ledger.ErrUnknownTenant, `"ghost"`},
		{"batch, unknown batch", batch("acme", "b2"), ErrUnknownBatch, `"b2"`},
		{"batch, another tenant's batch", batch("priced", "b1"), ErrUnknownBatch, `"b1"`},
		{"batch totals, no batches", totals("priced"), nil, ""},
		{"batch totals, unknown tenant", totals("ghost"), ledger.ErrUnknownTenant, `"ghost"`},
	}
	for _, tt := range tests {
		err := tt.build()
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		} else if err != nil && !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%s: %q does not quote %s", tt.name, err, tt.names)
		}
	}
}

// handGroup adds up records as a report group, costs by the default price
// book computed by hand.
func handGroup(us []contracts.Usage) Group {
	var g Group
	for _, u := range us {
		g.Jobs++
		g.InputTokens += int64(u.InputTokens)
		g.OutputTokens += int64(u.OutputTokens)
		g.CachedInputTokens += int64(u.CachedInputTokens)
		g.Cost = g.Cost.Add(billtest.DefaultHandCost(u))
	}
	return g
}

// TestReportSameJobIDTwoTenants: two tenants' jobs of one id are two jobs;
// each tenant's report and batch report count its own once.
func TestReportSameJobIDTwoTenants(t *testing.T) {
	t.Parallel()
	b := ledgertest.Setup(t)
	ctx := t.Context()
	const id = "BATCH1-line7"
	day := time.Date(2026, 11, 7, 9, 0, 0, 0, time.UTC)
	acme := billtest.Usage(id, "acme", "stories260K", day, 100, 250, 60, 2.5, 0.97)
	beta := billtest.Usage(id, "beta", "stories260K", day.Add(time.Hour), 40, 10, 5, 0, 0.5)
	for _, u := range []*contracts.Usage{&acme, &beta} {
		u.BatchID, u.CustomID = "BATCH1", "line7"
		b.Store(t, *u)
	}
	b.WaitCharged(t, 2)
	for _, u := range []contracts.Usage{acme, beta} {
		want := billtest.DefaultHandCost(u)
		r, err := BuildReport(ctx, b.Pool, u.Tenant, day.Add(-time.Hour), day.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if r.Total.Jobs != 1 || r.Unrated != 0 || !r.Total.Cost.Equal(want) || r.Total.OutputTokens != int64(u.OutputTokens) {
			t.Errorf("%s: report total %+v, unrated %d, want one job costing %+v", u.Tenant, r.Total, r.Unrated, want)
		}
		br, err := BuildBatchReport(ctx, b.Pool, u.Tenant, "BATCH1")
		if err != nil {
			t.Fatal(err)
		}
		if len(br.Lines) != 1 || br.Lines[0].JobID != id || br.Lines[0].Cost == nil || !br.Lines[0].Cost.Equal(want) || br.Total.Jobs != 1 {
			t.Errorf("%s: batch report %+v", u.Tenant, br)
		}
	}
}
