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
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// TestMonthCloseReconciles closes two months as a finance team would,
// through NATS (usage into the billing service) and the CLI, on generated
// data: three tenants with taxes of 8.25 % (per invoice), 0 % and 19 %
// (per line); two currencies over time (globex moves from USD to EUR at
// the start of October, which a change mid-September is refused for, and
// usage of September arriving after September's close is billed in
// October in USD, beside October's EUR); back-dated price books re-rated
// by billing month; a credit larger than muller's September, which makes
// that month a credit note whose balance October's invoice takes. Every
// document is checked figure by figure, from what it prints: each line is
// quantity × unit price rounded half to even at the minor unit, the tax is
// the rate times the taxable amount by the tenant's rule, the total is
// lines + tax, a negative month is a credit note in its own series, and
// the all-tenants view equals the sum of the documents in each currency.
// Every comparison is exact, so one minor unit off fails it.
func TestMonthCloseReconciles(t *testing.T) {
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
	cliFails := func(status int, want string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(append(args, "--database-url", db)...)
		if code != status || !strings.Contains(errOut, want) {
			t.Errorf("zerolayer %s: status %d, want %d saying %q\n%s%s", strings.Join(args, " "), code, status, want, out, errOut)
		}
	}

	// Nothing can be invoiced before the supplier is known.
	cli("tenants", "set-billing", "acme", "--name", "Acme Inc.", "--address", `1 Main St\nAustin, TX 78701`, "--tax-rate", "0.0825", "--terms-days", "30")
	cli("tenants", "set-billing", "globex", "--name", "Globex SARL", "--address", "5 rue de la Paix\\nParis", "--tax-rate", "0")
	cli("tenants", "set-billing", "muller", "--name", "Müller GmbH", "--address", `Hauptstraße 5\n80331 München`, "--tax-id", "DE123456789",
		"--tax-rate", "0.19", "--tax-rounding", "line", "--terms-days", "14")
	cliFails(1, "supplier", "invoice", "close", "--tenant", "acme", "--month", "2026-09")
	cli("invoice", "supplier", "--name", "Zerolayer Inc.", "--address", `100 Market St\nSan Francisco, CA 94105`, "--tax-id", "US-EIN 12-3456789",
		"--email", "billing@zerolayer.example", "--payment-instructions", "ACH to account 000123456, routing 021000021")

	// Price books: acme's September, globex's USD then EUR from October
	// (not from 20 September), muller's EUR.
	cli("pricebook", "create", "--tenant", "acme", "--effective-from", "2026-09-01", "--currency", "USD",
		"--input", "0.0000016", "--output", "0.000007", "--ttft", "0.0000002", "--tool", "0.0000001", "--priority-high", "1.5")
	cli("pricebook", "create", "--tenant", "globex", "--effective-from", "2026-09-01", "--currency", "USD",
		"--input", "0.000003", "--output", "0.000015", "--ttft", "0.0000002", "--tool", "0.0000001")
	cliFails(1, "start of a month", "pricebook", "create", "--tenant", "globex", "--effective-from", "2026-09-20", "--currency", "EUR",
		"--input", "0.0000028", "--cached-input", "none", "--output", "0.000014", "--ttft", "0.0000002", "--tool", "0.0000001")
	cliFails(1, "not an ISO 4217", "pricebook", "create", "--tenant", "globex", "--effective-from", "2026-10-01", "--currency", "XYZ",
		"--input", "0.0000028", "--cached-input", "none", "--output", "0.000014", "--ttft", "0.0000002", "--tool", "0.0000001")
	cli("pricebook", "create", "--tenant", "globex", "--effective-from", "2026-10-01", "--currency", "EUR",
		"--input", "0.0000028", "--cached-input", "none", "--output", "0.000014", "--ttft", "0.0000002", "--tool", "0.0000001")
	cli("pricebook", "create", "--tenant", "muller", "--effective-from", "2026-09-01", "--currency", "EUR",
		"--input", "0.0001", "--cached-input", "0.00002", "--output", "0.0004", "--ttft", "0.000001", "--tool", "0.000001")

	sept := func(i int) int { return 1 + i%30 }
	records := slices.Concat(
		withMonth(monthUsage("acme", 40, sept), 9), withMonth(monthUsage("globex", 30, sept), 9), withMonth(monthUsage("muller", 20, sept), 9),
		withMonth(renumber(monthUsage("acme", 30, sept), "oct"), 10), withMonth(renumber(monthUsage("globex", 25, sept), "oct"), 10),
		withMonth(renumber(monthUsage("muller", 20, sept), "oct"), 10))
	publishUsages(t, js, records)
	waitCharges(t, ctx, pool, len(records))

	// A back-dated book for acme from 15 September, re-rated by billing
	// month before the close.
	cli("pricebook", "create", "--tenant", "acme", "--effective-from", "2026-09-15", "--currency", "USD",
		"--input", "0.0000018", "--output", "0.0000065", "--ttft", "0.0000002", "--tool", "0.0000001", "--priority-high", "1.5")
	out := cli("rerate", "--tenant", "acme", "--month", "2026-09", "--by", "alice", "--format", "json")
	var rs ledger.RerateSummary
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "{\n  \"tenant\""):]), &rs); err != nil {
		t.Fatalf("rerate output: %v\n%s", err, out)
	}
	if rs.Jobs != 40 || rs.Changed == 0 || rs.Period != "2026-09" {
		t.Errorf("rerate --month 2026-09: %+v, want 40 jobs, some changed", rs)
	}
	// Credits: more than muller's September; an amount finer than a cent
	// is refused.
	cliFails(1, "minor unit", "credit", "add", "--tenant", "acme", "--month", "2026-09", "--amount", "0.005", "--reason", "x", "--by", "bob")
	cliFails(1, "ISO 4217", "credit", "add", "--tenant", "acme", "--month", "2026-09", "--amount", "1", "--currency", "XYZ", "--reason", "x", "--by", "bob")
	cli("credit", "add", "--tenant", "muller", "--month", "2026-09", "--amount", "8.00", "--reason", "migration goodwill", "--by", "finance-ops")
	cli("credit", "add", "--tenant", "acme", "--month", "2026-09", "--amount", "0.07", "--reason", "SLA miss on 2026-09-12", "--by", "finance-ops")

	// Close September.
	dir := t.TempDir()
	var docs []*finance.Invoice
	for _, tenant := range []string{"acme", "globex", "muller"} {
		cli("invoice", "close", "--tenant", tenant, "--month", "2026-09", "--by", "carol", "--out", dir)
	}
	docs = append(docs, periodDocs(t, ctx, pool, "2026-09")...)
	cn := docs[len(docs)-1]
	if cn.Tenant != "muller" || cn.Kind != finance.KindCreditNote || cn.Number != fmt.Sprintf("CN-%d-000001", time.Now().UTC().Year()) {
		t.Fatalf("muller's September: %s %s, want the first credit note", cn.Kind, cn.Number)
	}

	// Usage of September that arrives late: priced in USD by globex's
	// September book, billed in October beside October's EUR.
	late := withMonth(renumber(monthUsage("globex", 3, func(int) int { return 29 }), "late"), 9)
	publishUsages(t, js, late)
	waitCharges(t, ctx, pool, len(records)+len(late))
	cliFails(1, "invoiced", "rerate", "--tenant", "globex", "--month", "2026-09")
	dry := cli("rerate", "--tenant", "globex", "--month", "2026-10", "--dry-run", "--format", "json")
	if err := json.Unmarshal([]byte(dry), &rs); err != nil {
		t.Fatal(err)
	}
	if rs.Jobs != 25+3 {
		t.Errorf("rerate --month 2026-10 of globex looks at %d jobs, want October's 25 and the 3 late ones", rs.Jobs)
	}
	// October's report of globex: one per currency; the late usage is the
	// USD one, and each daily trend adds up to its total.
	cliFails(1, "--currency", "report", "--tenant", "globex", "--month", "2026-10")
	for cur, jobs := range map[string]int64{"USD": 3, "EUR": 25} {
		var rep finance.Report
		if err := json.Unmarshal([]byte(cli("report", "--tenant", "globex", "--month", "2026-10", "--currency", cur, "--format", "json")), &rep); err != nil {
			t.Fatal(err)
		}
		daily := decimal.Zero
		for _, d := range rep.Daily {
			daily = daily.Add(d.Cost.Total)
		}
		if rep.Currency != cur || rep.Total.Jobs != jobs || !daily.Equal(rep.Total.Cost.Total) {
			t.Errorf("globex's October in %s: %s, %d jobs, total %s, daily trend %s; want %d jobs adding up", cur, rep.Currency, rep.Total.Jobs,
				rep.Total.Cost.Total, daily, jobs)
		}
	}
	cliFails(1, "is tenant acme's, not globex's", "rerate", "--tenant", "globex", "--month", "2026-10", "--book", "pb2", "--dry-run")

	for _, tenant := range []string{"acme", "globex", "muller"} {
		cli("invoice", "close", "--tenant", tenant, "--month", "2026-10", "--by", "carol", "--out", dir)
	}
	oct := periodDocs(t, ctx, pool, "2026-10")
	docs = append(docs, oct...)
	var globexCur []string
	for _, d := range oct {
		if d.Tenant == "globex" {
			globexCur = append(globexCur, d.Currency)
		}
		if d.Tenant == "muller" && (!d.BalanceApplied.Equal(decimal.Min(cn.BalanceCarried, d.TotalDisplay)) || !d.BalanceApplied.IsPositive()) {
			t.Errorf("muller's October takes %s of the balance, want %s of %s", d.BalanceApplied, cn.BalanceCarried, d.TotalDisplay)
		}
		if d.Tenant == "muller" && !strings.Contains(d.PaymentTerms, cn.Number) {
			t.Errorf("muller's October does not say where its credit balance comes from: %q", d.PaymentTerms)
		}
	}
	if !slices.Equal(globexCur, []string{"EUR", "USD"}) {
		t.Errorf("globex's October documents are in %v, want EUR and USD (the late usage)", globexCur)
	}

	// ZL_KEEP_INVOICES=DIR keeps the rendered documents, to look at.
	if keep := os.Getenv("ZL_KEEP_INVOICES"); keep != "" {
		if err := os.CopyFS(keep, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
	}
	numbers := map[string]bool{}
	for _, d := range docs {
		checkDocument(t, ctx, pool, db, dir, d)
		// Shown again from the database, each is the file written at
		// the close, byte for byte.
		for _, f := range []string{"html", "pdf", "csv", "json"} {
			again := filepath.Join(t.TempDir(), "again."+f)
			cli("invoice", "show", d.Number, "--format", f, "-o", again)
			a, _ := os.ReadFile(again)
			b, _ := os.ReadFile(filepath.Join(dir, d.Number+"."+f))
			if len(a) == 0 || string(a) != string(b) {
				t.Errorf("%s.%s shown again differs from the one written at the close", d.Number, f)
			}
		}
		numbers[d.Number] = true
	}
	year := time.Now().UTC().Year()
	var invoices, credits int
	for _, d := range docs {
		if d.Kind == finance.KindCreditNote {
			credits++
		} else {
			invoices++
		}
	}
	for i := 1; i <= invoices; i++ {
		if !numbers[fmt.Sprintf("INV-%d-%06d", year, i)] {
			t.Errorf("invoice number %d of %d missing: %v", i, invoices, numbers)
		}
	}
	if credits != 1 || len(docs) != 7 {
		t.Errorf("%d documents, %d credit notes; want 7 and 1", len(docs), credits)
	}

	for _, month := range []string{"2026-09", "2026-10"} {
		checkAllTenants(t, db, month, docs)
	}
	// Every view in every format; unknown views and flags are refused.
	for _, f := range []string{"table", "csv", "json", "html"} {
		for _, v := range finance.OperatorMonthViews {
			cli("report", "--all-tenants", "--month", "2026-10", "--view", v, "--format", f)
		}
	}
	outDir := t.TempDir()
	cli("report", "--all-tenants", "--month", "2026-10", "--format", "html", "--out", outDir)
	if files, _ := filepath.Glob(filepath.Join(outDir, "*.html")); len(files) != len(finance.OperatorMonthViews) {
		t.Errorf("--out wrote %v", files)
	}
	cliFails(2, "--view", "report", "--all-tenants", "--month", "2026-10", "--view", "nope")
	cliFails(2, "--view", "report", "--all-tenants", "--from", "2026-10-01", "--to", "2026-11-01", "--view", "tag")
	cliFails(2, "--out", "report", "--all-tenants", "--from", "2026-10-01", "--to", "2026-11-01", "--out", outDir)
	cliFails(2, "--view", "report", "--tenant", "acme", "--month", "2026-10", "--view", "tag", "--format", "csv")
	cliFails(2, "flag provided but not defined", "report", "--all-tenants", "--month", "2026-10", "--bogus")
}

// withMonth moves records to month (9 or 10) of 2026, same day and time.
func withMonth(us []contracts.Usage, month time.Month) []contracts.Usage {
	for i := range us {
		c := us[i].CreatedAt
		us[i].CreatedAt = time.Date(2026, month, c.Day(), c.Hour(), c.Minute(), c.Second(), 0, time.UTC)
		us[i].FinishedAt = us[i].CreatedAt.Add(time.Second)
	}
	return us
}

// renumber prefixes the job ids of us, so that they differ from another
// month's.
func renumber(us []contracts.Usage, prefix string) []contracts.Usage {
	for i := range us {
		us[i].JobID = prefix + "-" + us[i].JobID
	}
	return us
}

// periodDocs reads every tenant's documents of month, with their lines,
// by tenant and currency.
func periodDocs(t *testing.T, ctx context.Context, pool *pgxpool.Pool, month string) []*finance.Invoice {
	t.Helper()
	var out []*finance.Invoice
	for _, tenant := range []string{"acme", "globex", "muller"} {
		heads, err := finance.ListPeriodInvoices(ctx, pool, tenant, month)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			inv, err := finance.GetInvoice(ctx, pool, h.Number)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, inv)
		}
	}
	return out
}

// checkDocument checks one document from what it prints (its CSV), the
// ledger behind it, and its customer renders.
func checkDocument(t *testing.T, ctx context.Context, pool *pgxpool.Pool, db, dir string, inv *finance.Invoice) {
	t.Helper()
	dec := decimal.RequireFromString
	code, out, errOut := runCLI("invoice", "show", inv.Number, "--format", "csv", "--database-url", db)
	if code != 0 {
		t.Fatalf("invoice show %s: %s", inv.Number, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(recs[0], name) }
	places := price.MinorUnits(inv.Currency)
	round := func(d decimal.Decimal) decimal.Decimal { return d.RoundBank(places) }
	rate := inv.TaxRate
	var lines, lineTax, exact decimal.Decimal
	totals := map[string]decimal.Decimal{}
	for _, r := range recs[1:] {
		amount := dec(r[col("amount")])
		if len(strings.SplitN(r[col("amount")], ".", 2)[1]) != int(places) {
			t.Errorf("%s: amount %q not printed to the minor unit", inv.Number, r[col("amount")])
		}
		switch kind := r[col("line_kind")]; kind {
		case finance.LineUsage, finance.LineCredit, finance.LineAdjustment:
			want := round(dec(r[col("quantity")]).Mul(dec(r[col("unit_price")])))
			if !amount.Equal(want) {
				t.Errorf("%s line %s: %s × %s = %s, printed %s", inv.Number, r[col("line")], r[col("quantity")], r[col("unit_price")], want, amount)
			}
			lines = lines.Add(amount)
			lineTax = lineTax.Add(round(amount.Mul(rate)))
			exact = exact.Add(dec(r[col("amount_exact")]))
		default:
			totals[kind] = amount
		}
	}
	wantTax := round(totals["subtotal"].Mul(rate))
	if inv.TaxRule == finance.TaxPerLine {
		wantTax = lineTax
	}
	total := totals["subtotal"].Add(totals["tax"])
	switch {
	case !totals["subtotal"].Equal(lines):
		t.Errorf("%s: subtotal %s, lines add up to %s", inv.Number, totals["subtotal"], lines)
	case !totals["tax"].Equal(wantTax):
		t.Errorf("%s: tax %s, want %s × %s by the %s rule = %s", inv.Number, totals["tax"], rate, totals["subtotal"], inv.TaxRule, wantTax)
	case !totals["total"].Equal(total):
		t.Errorf("%s: total %s, want %s", inv.Number, totals["total"], total)
	}
	isCN := strings.HasPrefix(inv.Number, "CN-")
	if total.IsNegative() != isCN || isCN != (inv.Kind == finance.KindCreditNote) {
		t.Errorf("%s: kind %s with total %s", inv.Number, inv.Kind, total)
	}
	if isCN {
		if !totals["amount_due"].IsZero() || !totals["balance_carried"].Equal(total.Neg()) {
			t.Errorf("%s: a credit note of %s shows amount due %s, carried %s", inv.Number, total, totals["amount_due"], totals["balance_carried"])
		}
	} else if !totals["amount_due"].Equal(total.Sub(totals["balance_applied"].Neg())) || totals["amount_due"].IsNegative() {
		t.Errorf("%s: amount due %s, want total %s less the balance applied %s", inv.Number, totals["amount_due"], total, totals["balance_applied"])
	}
	// The exact lines are the ledger: the month's charges and credits in
	// the document's currency.
	var ledger decimal.Decimal
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0) + (SELECT coalesce(sum(amount), 0) FROM credits
			WHERE tenant_id = $1 AND period = $2::date AND currency = $3)
		FROM charges WHERE tenant_id = $1 AND period = $2::date AND currency = $3`, inv.Tenant, inv.Period+"-01", inv.Currency).Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	if !exact.Equal(ledger) || !inv.Subtotal.Equal(ledger) {
		t.Errorf("%s: exact lines %s, ledger %s", inv.Number, exact, ledger)
	}
	// The customer's documents: supplier and customer, nothing internal.
	for _, ext := range []string{"html", "pdf"} {
		path := filepath.Join(dir, inv.Number+"."+ext)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		if ext == "pdf" {
			bin, err := exec.LookPath("pdftotext")
			if err != nil {
				continue
			}
			b, err := exec.Command(bin, "-layout", path, "-").Output()
			if err != nil {
				t.Fatal(err)
			}
			text = strings.Join(strings.Fields(string(b)), " ")
		}
		for _, want := range []string{"Zerolayer Inc.", "San Francisco, CA 94105", "12-3456789", inv.Customer.Name, inv.Number, inv.Title()} {
			if !strings.Contains(text, want) {
				t.Errorf("%s.%s lacks %q", inv.Number, ext, want)
			}
		}
		for _, bad := range []string{"finance-ops", "added by", "pb1", "pb2", "pb3", "closed early", "high_latency_risk", "effective_service", "carol"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s.%s shows internal text %q", inv.Number, ext, bad)
			}
		}
	}
}

// checkAllTenants checks the operator's month view in CSV: each tenant
// row is its document as printed; each view's total rows are the sums of
// its rows; per currency, the totals are the sums of the month's
// documents, and the tag view reaches the same subtotal.
func checkAllTenants(t *testing.T, db, month string, docs []*finance.Invoice) {
	t.Helper()
	dec := decimal.RequireFromString
	views := map[string][][]string{}
	for _, v := range finance.OperatorMonthViews {
		code, out, errOut := runCLI("report", "--all-tenants", "--month", month, "--view", v, "--format", "csv", "--database-url", db)
		if code != 0 {
			t.Fatalf("report --all-tenants --month %s --view %s: %s", month, v, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		views[v] = recs
	}
	head := views["tenant"][0]
	col := func(name string) int { return slices.Index(head, name) }
	amounts := []string{"usage", "credits", "subtotal", "tax", "total", "balance_applied", "amount_due", "resource_cost", "margin"}
	type sums map[string]decimal.Decimal
	// What the month's documents say, per currency.
	want := map[string]sums{}
	for _, d := range docs {
		if d.Period != month {
			continue
		}
		s := want[d.Currency]
		if s == nil {
			s = sums{}
			want[d.Currency] = s
		}
		s["subtotal"] = s["subtotal"].Add(d.SubtotalDisplay)
		s["tax"] = s["tax"].Add(d.TaxDisplay)
		s["total"] = s["total"].Add(d.TotalDisplay)
		s["amount_due"] = s["amount_due"].Add(d.AmountDue)
		s["balance_applied"] = s["balance_applied"].Add(d.BalanceApplied)
	}
	for v, recs := range views {
		rows := map[string]sums{}
		totals := map[string][]string{}
		for _, r := range recs[1:] {
			cur := r[col("currency")]
			if r[col("key")] == "total" {
				totals[cur] = r
				continue
			}
			if rows[cur] == nil {
				rows[cur] = sums{}
			}
			for _, a := range amounts {
				rows[cur][a] = rows[cur][a].Add(dec(r[col(a)]))
			}
			if v == "tenant" {
				i := slices.IndexFunc(docs, func(d *finance.Invoice) bool { return d.Number == r[col("document")] })
				if i < 0 || docs[i].Tenant != r[col("key")] || !dec(r[col("subtotal")]).Equal(docs[i].SubtotalDisplay) ||
					!dec(r[col("amount_due")]).Equal(docs[i].AmountDue) {
					t.Errorf("%s tenant row %v is not its document", month, r)
				}
			}
		}
		if len(totals) != len(want) {
			t.Errorf("%s view %s: totals in %d currencies, documents in %d", month, v, len(totals), len(want))
		}
		for cur, w := range want {
			tr := totals[cur]
			if tr == nil {
				t.Errorf("%s view %s: no total row in %s", month, v, cur)
				continue
			}
			if !dec(tr[col("subtotal")]).Equal(w["subtotal"]) {
				t.Errorf("%s view %s, %s: subtotal %s, documents %s", month, v, cur, tr[col("subtotal")], w["subtotal"])
			}
			if v == "tag" {
				if !dec(tr[col("subtotal")]).Equal(rows[cur]["subtotal"]) {
					t.Errorf("%s tag view, %s: total %s, rows %s", month, cur, tr[col("subtotal")], rows[cur]["subtotal"])
				}
				continue
			}
			for _, a := range []string{"tax", "total", "amount_due", "balance_applied"} {
				if !dec(tr[col(a)]).Equal(w[a]) {
					t.Errorf("%s view %s, %s: %s %s, documents %s", month, v, cur, a, tr[col(a)], w[a])
				}
			}
			if v == "tenant" {
				for _, a := range amounts {
					if !dec(tr[col(a)]).Equal(rows[cur][a]) {
						t.Errorf("%s view tenant, %s: total %s %s, rows add up to %s", month, cur, a, tr[col(a)], rows[cur][a])
					}
				}
			}
		}
	}
}
