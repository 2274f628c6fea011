package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// monthUsage makes n usage records of tenant spread over November 2026,
// deterministic: priorities, batches, cached input and timings vary.
func monthUsage(tenant string, n int, day func(i int) int) []contracts.Usage {
	prios := []contracts.Priority{contracts.PriorityHigh, contracts.PriorityNormal, contracts.PriorityNormal, contracts.PriorityLow}
	out := make([]contracts.Usage, n)
	for i := range out {
		created := time.Date(2026, 11, day(i), i%24, i%60, i%59, 0, time.UTC)
		u := contracts.Usage{
			JobID: fmt.Sprintf("%s-%05d", tenant, i), Tenant: tenant, Model: []string{"tiny", "small"}[i%2],
			Priority: prios[i%4], Bucket: contracts.BucketMedium, Status: contracts.StatusCompleted,
			InputTokens: 2000 + 37*(i%50), OutputTokens: 300 + 11*(i%40), CachedInputTokens: (i % 3) * 500,
			QueueMs: 1.5, TimeToFirstTokenMs: 20 + float64(i%60), TimePerTokenMs: 2.25, InterTokenMsP50: 2, InterTokenMsP99: 4.5,
			TotalMs: 800 + float64(i%100), ToolExecutionTimeMs: float64(i%5) * 0.75, MemoryAllocatedMB: 3.5,
			Attempt: 1, WorkerID: "w1", Device: "cpu", Confidence: 0.97,
			CreatedAt: created, FinishedAt: created.Add(time.Second),
		}
		if i%5 == 0 {
			u.BatchID, u.CustomID = "nightly", fmt.Sprint("line-", i)
		}
		out[i] = u
	}
	return out
}

func publishUsages(t *testing.T, js jetstream.JetStream, us []contracts.Usage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var acks []jetstream.PubAckFuture
	for _, u := range us {
		body, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		msg := &nats.Msg{Subject: contracts.UsageSubject(u.Tenant), Data: body, Header: contracts.NewHeader(u.Tenant, contracts.Traceparent{})}
		msg.Header.Set(contracts.HeaderMsgID, u.Tenant+"/"+u.JobID)
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("publish: no ack")
		}
	}
}

// TestFinanceMonth is a finance team's month end to end, through NATS
// (usage records into the billing service) and the CLI: three tenants'
// jobs across two price-book versions (one change mid-month), a credit, a
// backdated correction re-rated before the close, the close with numbered
// invoices, and a late usage record after it. The invoice's total is the
// sum of its lines, the report's total and the sum of the period's
// charges and credits, to the decimal; the locked month refuses a
// re-rating and a credit; the late record is billed in December.
func TestFinanceMonth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	pool := dbtest.Pool(t)
	db := schemaURL(t, pool)
	srv := natstest.Run(t)
	_, js := srv.Connect(t)
	svc, err := ledger.NewService(ledger.Config{DB: pool, JetStream: js, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ingester: ledger.IngesterConfig{Provision: true, RateInBatches: true}, River: ledger.RiverConfig{RollupDelay: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(context.Background())

	cli := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(append(args, "--database-url", db)...)
		if code != 0 {
			t.Fatalf("zerolayer %s: status %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	cliFails := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(append(args, "--database-url", db)...)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("zerolayer %s: status %d, want a failure saying %q\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
	}
	dec := decimal.RequireFromString
	// acme has books of its own: cached input at a quarter of the input
	// price, high priority at 1.5×, batch jobs at half price; on the 16th
	// the output price goes up.
	for _, pb := range []price.Book{
		{Tenant: "acme", EffectiveAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Currency: "USD", PIn: dec("0.000004"),
			PCachedIn: ptr(dec("0.000001")), POut: dec("0.000016"), PTTFT: dec("0.0000002"), PTool: dec("0.0000001"),
			MultHigh: dec("1.5"), MultBatch: dec("0.5"), Note: "November"},
		{Tenant: "acme", EffectiveAt: time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC), Currency: "USD", PIn: dec("0.000004"),
			PCachedIn: ptr(dec("0.000001")), POut: dec("0.00002"), PTTFT: dec("0.0000002"), PTool: dec("0.0000001"),
			MultHigh: dec("1.5"), MultBatch: dec("0.5"), Note: "mid-month rise"},
	} {
		if _, err := finance.CreatePriceBook(ctx, pool, pb); err != nil {
			t.Fatal(err)
		}
	}
	if err := finance.SetTenantBilling(ctx, pool, finance.TenantBilling{Tenant: "acme", TaxRate: dec("0.2"), PaymentTermsDays: 14,
		Customer: finance.Customer{Name: "Acme Corp", Address: "1 Road Runner Way\nDesert Springs", Email: "ap@acme.test", TaxID: "EU123"}}); err != nil {
		t.Fatal(err)
	}
	// 3,000 jobs: acme's 2,400 (two re-rating transactions after the
	// 16th), globex's and initech's 300 each at the default book.
	everyDay := func(i int) int { return 1 + i%30 }
	records := slices.Concat(monthUsage("acme", 2400, everyDay), monthUsage("globex", 300, everyDay), monthUsage("initech", 300, everyDay))
	publishUsages(t, js, records)
	waitCharges(t, ctx, pool, len(records))

	// A backdated correction: the rise was too high. A new version from
	// the same day replaces it; a dry run shows the difference, then the
	// re-rating runs as River work in the billing service.
	corrected, err := finance.CreatePriceBook(ctx, pool, price.Book{Tenant: "acme", EffectiveAt: time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC),
		Currency: "USD", PIn: dec("0.000004"), PCachedIn: ptr(dec("0.000001")), POut: dec("0.000018"), PTTFT: dec("0.0000002"),
		PTool: dec("0.0000001"), MultHigh: dec("1.5"), MultBatch: dec("0.5"), Note: "corrected rise"})
	if err != nil {
		t.Fatal(err)
	}
	lateHalf := 0
	for _, u := range records {
		if u.Tenant == "acme" && u.CreatedAt.Day() >= 16 {
			lateHalf++
		}
	}
	dry := cli("rerate", "--tenant", "acme", "--from", "2026-11-01", "--to", "2026-12-01", "--dry-run", "--format", "json")
	var ds ledger.RerateSummary
	if err := json.Unmarshal([]byte(dry), &ds); err != nil {
		t.Fatal(err)
	}
	if !ds.DryRun || ds.Jobs != 2400 || ds.Changed != int64(lateHalf) || !ds.Difference().IsNegative() {
		t.Fatalf("dry run: %+v, want %d of 2400 changed, cheaper", ds, lateHalf)
	}
	if n := count(t, pool, `SELECT count(*) FROM charge_history`); n != 0 {
		t.Fatalf("the dry run wrote %d history rows", n)
	}
	before := sumCharges(t, pool, "acme", "2026-11-01")
	out := cli("rerate", "--tenant", "acme", "--from", "2026-11-01", "--to", "2026-12-01", "--by", "alice")
	if !strings.Contains(out, "done:") || !strings.Contains(out, fmt.Sprintf("%d charges changed", lateHalf)) {
		t.Fatalf("rerate:\n%s", out)
	}
	if n := count(t, pool, `SELECT count(*) FROM charge_history WHERE tenant_id = 'acme' AND replaced_by LIKE 'alice%'`); n != lateHalf {
		t.Errorf("%d charges in charge_history, want %d", n, lateHalf)
	}
	if n := count(t, pool, `SELECT count(*) FROM charges WHERE tenant_id = 'acme' AND price_book_id = $1`, corrected.ID); n != lateHalf {
		t.Errorf("%d charges on the corrected book, want %d", n, lateHalf)
	}
	if after := sumCharges(t, pool, "acme", "2026-11-01"); !after.Equal(before.Add(ds.Difference())) {
		t.Errorf("charges after the re-rating %s, want %s + %s", after, before, ds.Difference())
	}
	// The daily rollups caught up with the re-rating.
	natstest.Until(t, time.Minute, "the rollups to catch up", func() bool {
		var daily decimal.Decimal
		pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0) FROM usage_daily WHERE tenant_id = 'acme'`).Scan(&daily)
		return daily.Equal(sumCharges(t, pool, "acme", "2026-11-01"))
	})

	// A credit for an outage, and an adjustment.
	cli("credit", "add", "--tenant", "acme", "--month", "2026-11", "--amount", "2.50", "--reason", "SLA miss on 2026-11-12", "--by", "bob")
	cli("credit", "add", "--tenant", "acme", "--month", "2026-11", "--amount", "0.75", "--kind", "adjustment", "--reason", "support hours", "--by", "bob")

	// Close the month for the three tenants.
	cli("invoice", "supplier", "--name", "Zerolayer Inc.", "--address", `100 Market St\nSan Francisco`)
	dir := t.TempDir()
	var invs []*finance.Invoice
	for _, tenant := range []string{"acme", "globex", "initech"} {
		out := cli("invoice", "close", "--tenant", tenant, "--month", "2026-11", "--by", "carol", "--out", dir)
		inv, err := finance.GetPeriodInvoice(ctx, pool, tenant, "2026-11", "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, inv.Number) || !strings.Contains(out, inv.AmountDue.StringFixed(2)) {
			t.Errorf("invoice close printed:\n%s", out)
		}
		invs = append(invs, inv)
	}
	for i, inv := range invs {
		if want := fmt.Sprintf("INV-%d-%06d", time.Now().UTC().Year(), i+1); inv.Number != want {
			t.Errorf("invoice %d numbered %s, want %s", i, inv.Number, want)
		}
		checkInvoice(t, ctx, pool, db, inv)
	}
	acme := invs[0]
	if !acme.TaxRate.Equal(dec("0.2")) || acme.Customer.Name != "Acme Corp" || acme.DueAt != acme.IssuedAt.AddDate(0, 0, 14).Format(time.DateOnly) {
		t.Errorf("acme's invoice: %+v", acme)
	}
	var credits int
	for _, l := range acme.Lines {
		if l.Kind != finance.LineUsage {
			credits++
		}
	}
	if credits != 2 || !acme.Subtotal.Equal(sumCharges(t, pool, "acme", "2026-11-01").Add(dec("-2.50")).Add(dec("0.75"))) {
		t.Errorf("acme's invoice has %d credit lines, subtotal %s", credits, acme.Subtotal)
	}
	for _, f := range []string{"html", "pdf", "csv", "json"} {
		if st, err := os.Stat(filepath.Join(dir, acme.Number+"."+f)); err != nil || st.Size() == 0 {
			t.Errorf("invoice close --out wrote no %s: %v", f, err)
		}
	}
	if _, err := exec.LookPath("pdftotext"); err == nil {
		text, err := exec.Command("pdftotext", "-layout", filepath.Join(dir, acme.Number+".pdf"), "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{acme.Number, "Acme Corp", "Desert Springs", "SLA miss on 2026-11-12", acme.AmountDue.StringFixed(2)} {
			if !strings.Contains(string(text), want) {
				t.Errorf("the PDF's text lacks %q:\n%s", want, text)
			}
		}
	}

	// The month is locked.
	cliFails("invoiced", "rerate", "--tenant", "acme", "--from", "2026-11-10", "--to", "2026-11-11")
	cliFails("invoiced", "credit", "add", "--tenant", "acme", "--month", "2026-11", "--amount", "1", "--reason", "late", "--by", "bob")
	cliFails("invoiced already", "invoice", "close", "--tenant", "acme", "--month", "2026-11", "--by", "carol")

	// A late usage record of November, after the close, goes to December.
	late := monthUsage("acme", 2401, func(int) int { return 20 })[2400]
	publishUsages(t, js, []contracts.Usage{late})
	waitCharges(t, ctx, pool, len(records)+1)
	c, err := ledger.GetCharge(ctx, pool, "acme", late.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Period != "2026-12" || !strings.Contains(c.Note, "2026-11 was invoiced") || !strings.Contains(c.Note, acme.Number) {
		t.Errorf("late charge: period %s, note %q", c.Period, c.Note)
	}
	again, err := finance.GetInvoice(ctx, pool, acme.Number)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Total.Equal(acme.Total) || len(again.Lines) != len(acme.Lines) {
		t.Errorf("the closed invoice changed: %s, was %s", again.Total, acme.Total)
	}
	checkInvoice(t, ctx, pool, db, again)
	dec12 := reportCSVTotal(t, db, "acme", "2026-12")
	if !dec12.Equal(c.Cost.Total) {
		t.Errorf("December's report total %s, want the late charge %s", dec12, c.Cost.Total)
	}
	// The late charge is December's, but its usage is November's: a
	// re-rating by November's usage is refused.
	cliFails("invoiced", "rerate", "--tenant", "acme", "--from", "2026-11-20", "--to", "2026-11-21")

	// The operator's view: revenue per tenant is its charges.
	var op finance.OperatorReport
	if err := json.Unmarshal([]byte(cli("report", "--all-tenants", "--from", "2026-11-01", "--to", "2026-12-01", "--format", "json")), &op); err != nil {
		t.Fatal(err)
	}
	if len(op.Tenants) != 3 {
		t.Fatalf("operator report: %+v", op.Tenants)
	}
	for _, m := range op.Tenants {
		var want decimal.Decimal
		pool.QueryRow(ctx, `SELECT sum(c.total) FROM charges c JOIN usage u USING (tenant_id, job_id)
			WHERE c.tenant_id = $1 AND u.created_at < '2026-12-01'`, m.Key).Scan(&want)
		if !m.Revenue.Equal(want) || !m.Cost.IsPositive() || !m.Margin.Equal(m.Revenue.Sub(m.Cost)) {
			t.Errorf("operator report %s: revenue %s (want %s), cost %s, margin %s", m.Key, m.Revenue, want, m.Cost, m.Margin)
		}
	}
	// New resource rates from November on price the cost side: engine
	// time alone here.
	cli("costs", "set", "--effective-from", "2026-11-01", "--engine-ms", "0.00001", "--kv-mib-ms", "0", "--tool-ms", "0", "--note", "test")
	if err := json.Unmarshal([]byte(cli("report", "--all-tenants", "--from", "2026-11-01", "--to", "2026-12-01", "--format", "json")), &op); err != nil {
		t.Fatal(err)
	}
	for _, m := range op.Tenants {
		var engine decimal.Decimal
		pool.QueryRow(ctx, `SELECT sum(u.total_ms) FROM charges c JOIN usage u USING (tenant_id, job_id)
			WHERE c.tenant_id = $1 AND u.created_at < '2026-12-01'`, m.Key).Scan(&engine)
		if !m.Cost.Equal(engine.Mul(dec("0.00001"))) || !m.EngineMs.Equal(engine) {
			t.Errorf("operator report %s with the new rates: cost %s, want %s ms × 0.00001", m.Key, m.Cost, engine)
		}
	}
	cliFails("unknown tenant", "report", "--tenant", "acne", "--month", "2026-11")
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCharges waits until n charges are stored.
func waitCharges(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) {
	t.Helper()
	natstest.Until(t, 2*time.Minute, fmt.Sprint(n, " charges"), func() bool {
		var got int
		pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&got)
		return got >= n
	})
}

// sumCharges is the sum of tenant's charges invoiced in the period that
// starts on day.
func sumCharges(t *testing.T, pool *pgxpool.Pool, tenant, day string) decimal.Decimal {
	t.Helper()
	var sum decimal.Decimal
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(total), 0) FROM charges WHERE tenant_id = $1 AND period = $2::date`,
		tenant, day).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// reportCSVTotal runs report --month in every CSV view, checks each
// view's rows add up to its total row, and returns that total.
func reportCSVTotal(t *testing.T, db, tenant, month string) decimal.Decimal {
	t.Helper()
	var total decimal.Decimal
	for k, view := range finance.ReportViews {
		code, out, errOut := runCLI("report", "--tenant", tenant, "--month", month, "--format", "csv", "--view", view, "--database-url", db)
		if code != 0 {
			t.Fatalf("report --view %s: %s", view, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) int { return slices.Index(recs[0], name) }
		var rows, shown decimal.Decimal
		for _, r := range recs[1 : len(recs)-1] {
			rows = rows.Add(decimal.RequireFromString(r[col("cost_total_exact")]))
			shown = shown.Add(decimal.RequireFromString(r[col("cost_total")]))
		}
		last := recs[len(recs)-1]
		exact := decimal.RequireFromString(last[col("cost_total_exact")])
		if last[col("key")] != "total" || !rows.Equal(exact) || !shown.Equal(decimal.RequireFromString(last[col("cost_total")])) {
			t.Errorf("report %s %s view %s: rows add up to %s (shown %s), total row %v", tenant, month, view, rows, shown, last)
		}
		if k > 0 && !exact.Equal(total) {
			t.Errorf("report %s %s: view %s's total %s, %s's %s", tenant, month, view, exact, finance.ReportViews[0], total)
		}
		total = exact
	}
	return total
}

// checkInvoice: the invoice's exact lines add up to its exact subtotal,
// which is the period's charges plus its credits, and the report's total,
// to the decimal; each usage line is quantity × unit price; the printed
// amounts add up to the amount due, the tax being the rate times the
// printed subtotal, rounded once (the tenants here round per invoice).
func checkInvoice(t *testing.T, ctx context.Context, pool *pgxpool.Pool, db string, inv *finance.Invoice) {
	t.Helper()
	var lines, shown decimal.Decimal
	for _, l := range inv.Lines {
		lines, shown = lines.Add(l.Amount), shown.Add(l.AmountDisplay)
		if l.Kind == finance.LineUsage && !l.Quantity.Mul(l.UnitPrice).Equal(l.Amount) {
			t.Errorf("%s line %d: %s × %s ≠ %s", inv.Number, l.No, l.Quantity, l.UnitPrice, l.Amount)
		}
	}
	var credits decimal.Decimal
	pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM credits WHERE tenant_id = $1 AND period = $2::date`, inv.Tenant, inv.Period+"-01").Scan(&credits)
	charges := sumCharges(t, pool, inv.Tenant, inv.Period+"-01")
	report := reportCSVTotal(t, db, inv.Tenant, inv.Period)
	if !lines.Equal(inv.Subtotal) || !inv.Subtotal.Equal(charges.Add(credits)) || !report.Equal(inv.Subtotal) {
		t.Errorf("%s: lines %s, subtotal %s, charges %s + credits %s, report %s: not all equal", inv.Number, lines, inv.Subtotal, charges, credits, report)
	}
	if !inv.Total.Equal(inv.Subtotal.Add(inv.Subtotal.Mul(inv.TaxRate))) ||
		!inv.TaxDisplay.Equal(inv.SubtotalDisplay.Mul(inv.TaxRate).RoundBank(2)) || !shown.Equal(inv.SubtotalDisplay) ||
		!inv.SubtotalDisplay.Add(inv.TaxDisplay).Equal(inv.TotalDisplay) || !inv.TotalDisplay.Sub(inv.BalanceApplied).Equal(inv.AmountDue) {
		t.Errorf("%s: total %s (tax %s at %s), due %s; printed lines %s, subtotal %s, tax %s", inv.Number, inv.Total, inv.Tax, inv.TaxRate,
			inv.AmountDue, shown, inv.SubtotalDisplay, inv.TaxDisplay)
	}
	// The accounting CSV says the same.
	code, out, errOut := runCLI("invoice", "show", inv.Number, "--format", "csv", "--database-url", db)
	if code != 0 {
		t.Fatalf("invoice show: %s", errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if slices.Contains(r, "subtotal") && slices.Contains(r, inv.Subtotal.String()) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: the CSV has no subtotal row of %s:\n%s", inv.Number, inv.Subtotal, out)
	}
}
