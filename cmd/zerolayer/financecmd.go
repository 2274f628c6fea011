package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// whoAmI is who a finance command says did it: --by, else $USER.
func whoAmI(by string) string {
	return cmp.Or(by, os.Getenv("USER"), os.Getenv("LOGNAME"), "cli")
}

// runRerate is `zerolayer rerate`: price a tenant's usage of a period
// again, showing the difference first.
func runRerate(ctx context.Context, args []string) error {
	fs := newFlags("rerate")
	tenant := fs.String("tenant", "", "tenant whose charges to re-rate (required)")
	fromS := fs.String("from", "", "start of the usage period, included: 2026-11-01 (UTC) or RFC 3339 (with --to)")
	toS := fs.String("to", "", "end of the usage period, excluded (with --from)")
	month := fs.String("month", "", "instead of --from/--to: the billing month (2026-12) whose charges to re-rate, late usage of earlier months included")
	model := fs.String("model", "", "re-rate this model's usage only")
	book := fs.String("book", "", "price with this book (pbN) instead of each record's book in force")
	dry := fs.Bool("dry-run", false, "show the difference and write nothing")
	by := fs.String("by", "", "who asks, kept with each replaced charge (default $USER)")
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the billing service to finish the re-rating (0: queue it and return)")
	formatS := fs.String("format", "table", "output: table or json")
	dbURL := addDatabaseFlag(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tenant == "" || (*month == "") == (*fromS == "" && *toS == "") {
		return usagef("give --tenant, and --from and --to or --month")
	}
	a := ledger.RerateRangeArgs{Tenant: *tenant, Period: *month, Model: *model, By: whoAmI(*by)}
	var err error
	if *month != "" {
		if _, err := ledger.ParsePeriod(*month); err != nil {
			return usagef("--month: %v", err)
		}
	} else if a.From, a.To, err = parseReportPeriod(*fromS, *toS); err != nil {
		return err
	}
	if *formatS != "table" && *formatS != "json" {
		return usagef("--format: use table or json")
	}
	if *book != "" {
		if a.PriceBookID, err = parseBookID(*book); err != nil {
			return usagef("--book: %v", err)
		}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	sum, err := ledger.DryRerate(ctx, pool, a)
	if err != nil {
		return err
	}
	if *dry || sum.Changed+sum.New == 0 {
		if sum.Changed+sum.New == 0 && !*dry {
			fmt.Fprintln(stderr, "rerate: nothing would change; nothing queued")
		}
		return writeRerate(sum, *formatS)
	}
	if *formatS == "table" {
		fmt.Fprintln(stdout, "would change:")
		if err := writeRerate(sum, *formatS); err != nil {
			return err
		}
	}
	client, err := ledger.NewRiver(pool, ledger.RiverConfig{InsertOnly: true})
	if err != nil {
		return err
	}
	res, err := client.Insert(ctx, a, nil)
	if err != nil {
		return fmt.Errorf("rerate: queue the re-rating: %w", err)
	}
	id := res.Job.ID
	if *wait <= 0 {
		fmt.Fprintf(stdout, "queued as River job %d; the billing service works it\n", id)
		return nil
	}
	fmt.Fprintf(stderr, "rerate: queued as River job %d, waiting for the billing service (up to %s)\n", id, *wait)
	deadline := time.Now().Add(*wait)
	for {
		job, err := client.JobGet(ctx, id)
		if err != nil {
			return err
		}
		switch job.State {
		case rivertype.JobStateCompleted:
			var done ledger.RerateSummary
			if err := json.Unmarshal(job.Output(), &done); err != nil {
				return fmt.Errorf("rerate: job %d's output: %w", id, err)
			}
			if *formatS == "table" {
				fmt.Fprintln(stdout, "\ndone:")
			}
			return writeRerate(done, *formatS)
		case rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
			msg := "no error recorded"
			if n := len(job.Errors); n > 0 {
				msg = job.Errors[n-1].Error
			}
			return fmt.Errorf("rerate: River job %d %s: %s", id, job.State, msg)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rerate: River job %d is %s after %s: is the billing service running? it will be worked when it is", id, job.State, *wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func parseBookID(s string) (int64, error) {
	var id int64
	if _, err := fmt.Sscanf(s, "pb%d", &id); err == nil && id > 0 {
		return id, nil
	}
	if _, err := fmt.Sscanf(s, "%d", &id); err == nil && id > 0 {
		return id, nil
	}
	return 0, fmt.Errorf("%q is not a price book such as pb7", s)
}

func writeRerate(s ledger.RerateSummary, format string) error {
	if format == "json" {
		return writeJSON(s)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	scope := s.Tenant
	if s.Model != "" {
		scope += ", model " + s.Model
	}
	what := fmt.Sprintf("usage from %s to %s", s.From.Format(time.RFC3339), s.To.Format(time.RFC3339))
	if s.Period != "" {
		what = "charges billed in " + s.Period
	}
	fmt.Fprintf(tw, "%s, %s: %d jobs, %d charges changed, %d rated for the first time\n", scope, what, s.Jobs, s.Changed, s.New)
	fmt.Fprintf(tw, "\tinput\tcached input\tembedding input\toutput\tttft\ttool\ttotal\t\n")
	row := func(name string, b price.Breakdown) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, b.Input, b.CachedInput, b.EmbeddingInput, b.Output, b.TTFT, b.Tool, b.Total)
	}
	row("before", s.Before)
	row("after", s.After)
	a, b := s.After, s.Before
	d := price.Breakdown{Input: a.Input.Sub(b.Input), CachedInput: a.CachedInput.Sub(b.CachedInput),
		EmbeddingInput: a.EmbeddingInput.Sub(b.EmbeddingInput), Output: a.Output.Sub(b.Output), TTFT: a.TTFT.Sub(b.TTFT),
		Tool: a.Tool.Sub(b.Tool), Total: s.Difference()}
	row("difference", d)
	for k, n := range s.Books {
		fmt.Fprintf(tw, "book %s\t%d charges\t\t\t\t\t\t\t\n", k, n)
	}
	fmt.Fprintf(tw, "difference rounded: %s %s\n", price.DisplayAmount(s.Difference(), s.Currency), s.Currency)
	return tw.Flush()
}

// runInvoice is `zerolayer invoice close|show|list`.
func runInvoice(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("invoice"), args)
	if err != nil {
		return err
	}
	fs := newFlags("invoice " + sub)
	dbURL := addDatabaseFlag(fs, "")
	switch sub {
	case "close":
		tenant := fs.String("tenant", "", "tenant to invoice (required)")
		month := fs.String("month", "", "the month to close, 2026-11 (required)")
		early := fs.Bool("early", false, "close the month before it ends (a tenant that leaves); later usage of it is billed in the next month")
		allowUnrated := fs.Bool("allow-unrated", false, "close even while some of the month's usage is not rated yet (it is billed in the next month)")
		by := fs.String("by", "", "who closes the month (default $USER)")
		out := fs.String("out", "", "also write the invoice as HTML, PDF, CSV and JSON into this `DIR`")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *tenant == "" || *month == "" {
			return usagef("give --tenant and --month")
		}
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		invs, err := finance.CloseInvoice(ctx, pool, finance.CloseRequest{Tenant: *tenant, Period: *month, By: whoAmI(*by),
			Early: *early, AllowUnrated: *allowUnrated})
		if err != nil {
			return err
		}
		for i, inv := range invs {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			if err := writeInvoiceTable(inv); err != nil {
				return err
			}
			if *out != "" {
				if err := writeInvoiceFiles(inv, *out); err != nil {
					return err
				}
			}
		}
		return nil
	case "show":
		tenant := fs.String("tenant", "", "with --month: the tenant")
		month := fs.String("month", "", "with --tenant: the month invoiced")
		currency := fs.String("currency", "", "with --tenant and --month: the document in this currency (a month billed in two)")
		formatS := fs.String("format", "table", "table (internal view, with notes and price books), html or pdf (the customer's document), csv or json")
		outFile := fs.String("o", "", "write to this `FILE` instead of stdout")
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if (len(pos) == 1) == (*tenant != "" || *month != "") || (len(pos) == 0 && (*tenant == "" || *month == "")) || len(pos) > 1 {
			return usagef("give an invoice NUMBER, or --tenant and --month")
		}
		if *currency != "" && len(pos) == 1 {
			return usagef("--currency goes with --tenant and --month, not with a NUMBER")
		}
		var f finance.Format
		if *formatS != "table" {
			if f, err = finance.ParseInvoiceFormat(*formatS); err != nil {
				return usagef("--format: %v", err)
			}
		}
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		var inv *finance.Invoice
		if len(pos) == 1 {
			inv, err = finance.GetInvoice(ctx, pool, pos[0])
		} else {
			inv, err = finance.GetPeriodInvoice(ctx, pool, *tenant, *month, *currency)
		}
		if err != nil {
			return err
		}
		if *formatS == "table" {
			return writeInvoiceTable(inv)
		}
		if *outFile == "" {
			return inv.Write(stdout, f)
		}
		return writeFile(*outFile, func(w *os.File) error { return inv.Write(w, f) })
	case "list":
		tenant := fs.String("tenant", "", "only this tenant's invoices")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		invs, err := finance.ListInvoices(ctx, pool, *tenant)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NUMBER\tKIND\tTENANT\tPERIOD\tISSUED\tDUE\tJOBS\tSUBTOTAL\tTAX\tTOTAL\tAMOUNT DUE\tCURRENCY\tCLOSED BY")
		for _, inv := range invs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", inv.Number, inv.Kind, inv.Tenant, inv.Period,
				inv.IssuedAt.Format(time.DateOnly), inv.DueAt, inv.Jobs, money(inv.SubtotalDisplay, inv.Currency), money(inv.TaxDisplay, inv.Currency),
				money(inv.TotalDisplay, inv.Currency), money(inv.AmountDue, inv.Currency), inv.Currency, inv.ClosedBy)
		}
		return tw.Flush()
	case "supplier":
		return runSupplier(ctx, fs, dbURL, args)
	}
	return usagef("unknown command %q", sub)
}

// runSupplier is `zerolayer invoice supplier`: show the supplier's
// details, or, with any detail given, set them (details not given keep
// their value).
func runSupplier(ctx context.Context, fs *flag.FlagSet, dbURL *string, args []string) error {
	name := fs.String("name", "", "the supplier's legal name")
	address := fs.String("address", "", "its postal address (\\n starts a line)")
	taxID := fs.String("tax-id", "", "its VAT or tax number")
	email := fs.String("email", "", "where customers write about invoices")
	pay := fs.String("payment-instructions", "", "how to pay: bank account, payment link")
	by := fs.String("by", "", "who sets them (default $USER)")
	formatS := fs.String("format", "table", "table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *formatS != "table" && *formatS != "json" {
		return usagef("--format: use table or json")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	s, err := finance.GetSupplier(ctx, pool)
	change := set["name"] || set["address"] || set["tax-id"] || set["email"] || set["payment-instructions"]
	if err != nil && !(change && errors.Is(err, finance.ErrNoSupplier)) {
		return err
	}
	if change {
		for _, f := range []struct {
			name string
			src  *string
			dst  *string
		}{{"name", name, &s.Name}, {"address", address, &s.Address}, {"tax-id", taxID, &s.TaxID}, {"email", email, &s.Email},
			{"payment-instructions", pay, &s.PaymentInstructions}} {
			if set[f.name] {
				*f.dst = strings.ReplaceAll(*f.src, `\n`, "\n")
			}
		}
		if err := finance.SetSupplier(ctx, pool, s, whoAmI(*by)); err != nil {
			return err
		}
	}
	if *formatS == "json" {
		return writeJSON(s)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	for _, kv := range [][2]string{{"name", s.Name}, {"address", strings.ReplaceAll(s.Address, "\n", ", ")}, {"tax id", s.TaxID},
		{"email", s.Email}, {"payment instructions", s.PaymentInstructions}} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

func money(d decimal.Decimal, currency string) string {
	return d.StringFixed(price.MinorUnits(currency))
}

// writeInvoiceTable prints a document for a terminal: the internal view,
// with the amounts charged, each line's price book and who added a
// credit, the internal note and the exact ledger amounts.
func writeInvoiceTable(inv *finance.Invoice) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s %s: %s (%s), period %s, issued %s, due %s, currency %s, %d jobs\n", strings.ToLower(inv.Title()), inv.Number,
		inv.Customer.Name, inv.Tenant, inv.Period, inv.IssuedAt.Format(time.DateOnly), inv.DueAt, inv.Currency, inv.Jobs)
	if inv.Supplier.Name != "" {
		fmt.Fprintf(tw, "from: %s\n", inv.Supplier.Name)
	}
	if inv.Note != "" {
		fmt.Fprintf(tw, "internal note: %s\n", inv.Note)
	}
	fmt.Fprintf(tw, "\nno\tline\tquantity\tunit price\tamount\tinternal\t\n")
	for _, l := range inv.Lines {
		q, internal := "", l.PriceBook
		if l.Kind == finance.LineUsage {
			q = l.Quantity.String() + " " + l.Unit
		}
		if l.AddedBy != "" {
			internal = "added by " + l.AddedBy
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t\n", l.No, l.Description, q, l.UnitPrice, money(l.AmountDisplay, inv.Currency), internal)
	}
	fmt.Fprintf(tw, "\t\t\tsubtotal\t%s\t\t\n", money(inv.SubtotalDisplay, inv.Currency))
	fmt.Fprintf(tw, "\t\t\ttax %s%% (per %s)\t%s\t\t\n", inv.TaxRate.Mul(decimal.NewFromInt(100)), inv.TaxRule, money(inv.TaxDisplay, inv.Currency))
	fmt.Fprintf(tw, "\t\t\ttotal\t%s\t\t\n", money(inv.TotalDisplay, inv.Currency))
	if inv.BalanceApplied.IsPositive() {
		fmt.Fprintf(tw, "\t\t\tcredit balance applied\t%s\t\t\n", money(inv.BalanceApplied.Neg(), inv.Currency))
	}
	if inv.BalanceCarried.IsPositive() {
		fmt.Fprintf(tw, "\t\t\tcarried to the balance\t%s\t\t\n", money(inv.BalanceCarried, inv.Currency))
	}
	fmt.Fprintf(tw, "\t\t\tamount due\t%s\t\t\n", money(inv.AmountDue, inv.Currency))
	fmt.Fprintf(tw, "ledger (exact): charges and credits %s, tax on them %s, total %s\n", inv.Subtotal, inv.Tax, inv.Total)
	return tw.Flush()
}

// writeInvoiceFiles writes inv into dir as NUMBER.html, .pdf, .csv and
// .json, and says so on stderr.
func writeInvoiceFiles(inv *finance.Invoice, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"html", "pdf", "csv", "json"} {
		format, err := finance.ParseInvoiceFormat(f)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, inv.Number+"."+f)
		if err := writeFile(path, func(w *os.File) error { return inv.Write(w, format) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "invoice: wrote %s\n", path)
	}
	return nil
}

// writeFile writes path with write, removing it when write fails.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// runCredit is `zerolayer credit add|list`.
func runCredit(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("credit"), args)
	if err != nil {
		return err
	}
	fs := newFlags("credit " + sub)
	dbURL := addDatabaseFlag(fs, "")
	tenant := fs.String("tenant", "", "the tenant (required)")
	month := fs.String("month", "", "the month (2026-11); add: default the current UTC month")
	switch sub {
	case "add":
		amountS := fs.String("amount", "", "the amount, a decimal such as 25.00 (a credit is taken off the invoice; an adjustment is added with its sign)")
		kind := fs.String("kind", finance.LineCredit, "credit or adjustment")
		reason := fs.String("reason", "", "why (printed on the invoice; required)")
		currency := fs.String("currency", "", "currency (default: that of the tenant's price book in force)")
		by := fs.String("by", "", "who adds it (default $USER)")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *tenant == "" || *amountS == "" || *reason == "" {
			return usagef("give --tenant, --amount and --reason")
		}
		amount, err := decimal.NewFromString(*amountS)
		if err != nil {
			return usagef("--amount %q is not a decimal such as 25.00", *amountS)
		}
		period := cmp.Or(*month, time.Now().UTC().Format(ledger.PeriodFormat))
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		cur := *currency
		if cur == "" {
			m, err := ledger.ParsePeriod(period)
			if err != nil {
				return err
			}
			pb, err := ledger.EffectivePriceBook(ctx, pool, *tenant, "", m)
			if err != nil && !errors.Is(err, ledger.ErrNoPriceBook) {
				return err
			}
			cur = cmp.Or(pb.Currency, "USD")
		}
		c, err := finance.AddCredit(ctx, pool, finance.Credit{Tenant: *tenant, Period: period, Kind: *kind, Amount: amount,
			Currency: cur, Reason: *reason, CreatedBy: whoAmI(*by)})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %d: %s %s on %s's %s invoice (%s, added by %s)\n", c.Kind, c.ID, c.Amount, c.Currency, c.Tenant, c.Period, c.Reason, c.CreatedBy)
		return nil
	case "list":
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *tenant == "" {
			return usagef("give --tenant")
		}
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		cs, err := finance.ListCredits(ctx, pool, *tenant, *month)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPERIOD\tKIND\tAMOUNT\tCURRENCY\tREASON\tBY\tADDED\tINVOICE")
		for _, c := range cs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Period, c.Kind, c.Amount, c.Currency, c.Reason, c.CreatedBy,
				c.CreatedAt.UTC().Format(time.RFC3339), cmp.Or(c.Invoice, "(open)"))
		}
		return tw.Flush()
	}
	return usagef("unknown command %q", sub)
}

// reportPeriod writes tenant's report of a billing month.
func reportPeriod(ctx context.Context, dbURL, tenant, month, currency, formatS, view, outDir string) error {
	pool, format, err := openReport(ctx, dbURL, tenant, formatS)
	if err != nil {
		return err
	}
	defer pool.Close()
	r, err := inSnapshot(ctx, pool, func(tx pgx.Tx) (*finance.Report, error) {
		return finance.BuildPeriodReportIn(ctx, tx, tenant, month, currency)
	})
	if err != nil {
		return err
	}
	return writeReport(r, format, view, outDir)
}

// writeReport writes r in format; a CSV is one view (--view), or, with
// outDir, every view into a file of its own.
func writeReport(r *finance.Report, format finance.Format, view, outDir string) error {
	if format != finance.FormatCSV {
		return r.Write(stdout, format)
	}
	if outDir == "" {
		return r.WriteCSVView(stdout, view)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	name := cmp.Or(r.Period, r.From.Format(time.DateOnly)+"_"+r.To.Format(time.DateOnly))
	for _, v := range finance.ReportViews {
		path := filepath.Join(outDir, fmt.Sprintf("%s-%s-%s.csv", r.Tenant, name, v))
		if err := writeFile(path, func(w *os.File) error { return r.WriteCSVView(w, v) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: wrote %s\n", path)
	}
	return nil
}

// reportAllTenants writes the operator's all-tenants report: of a
// billing month (its documents; any view, any format, every view into
// outDir), or of the usage of a period (revenue against resource cost).
// Flags that do not apply are refused.
func reportAllTenants(ctx context.Context, dbURL, tenant, month, fromS, toS string, batch bool, formatS, view, outDir string) error {
	switch {
	case tenant != "":
		return usagef("give --tenant or --all-tenants, not both")
	case batch:
		return usagef("--batch and --batches are one tenant's; not with --all-tenants")
	case month != "" && (fromS != "" || toS != ""):
		return usagef("give --month or --from/--to, not both")
	case month == "" && (fromS == "" || toS == ""):
		return usagef("give --month (the invoices of a billing month) or --from and --to with --all-tenants")
	}
	format, err := finance.ParseFormat(formatS)
	if err != nil {
		return usagef("--format: %v", err)
	}
	if month == "" {
		if view != "" || outDir != "" {
			return usagef("--view and --out go with --all-tenants --month")
		}
		if format == finance.FormatHTML {
			return usagef("--format html: the usage view of --from/--to is table, csv or json; --month has every format")
		}
		from, to, err := parseReportPeriod(fromS, toS)
		if err != nil {
			return err
		}
		pool, err := openDB(ctx, dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		r, err := inSnapshot(ctx, pool, func(tx pgx.Tx) (*finance.OperatorReport, error) {
			return finance.BuildOperatorReport(ctx, tx, from, to)
		})
		if err != nil {
			return err
		}
		return r.Write(stdout, format)
	}
	if _, err := ledger.ParsePeriod(month); err != nil {
		return usagef("--month: %v", err)
	}
	if view == "" {
		view = finance.OperatorMonthViews[0]
	} else if !slices.Contains(finance.OperatorMonthViews, view) {
		return usagef("--view %q: use one of %s", view, strings.Join(finance.OperatorMonthViews, ", "))
	}
	if outDir != "" && view != finance.OperatorMonthViews[0] {
		return usagef("--out writes every view; leave --view out")
	}
	pool, err := openDB(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	now := time.Now()
	r, err := inSnapshot(ctx, pool, func(tx pgx.Tx) (*finance.OperatorMonth, error) {
		return finance.BuildOperatorMonth(ctx, tx, month, now)
	})
	if err != nil {
		return err
	}
	if outDir == "" {
		return r.WriteView(stdout, format, view)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	ext := map[finance.Format]string{finance.FormatTable: "txt"}[format]
	for _, v := range finance.OperatorMonthViews {
		path := filepath.Join(outDir, fmt.Sprintf("all-tenants-%s-%s.%s", month, v, cmp.Or(ext, string(format))))
		if err := writeFile(path, func(w *os.File) error { return r.WriteView(w, format, v) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: wrote %s\n", path)
	}
	return nil
}

// runCosts is `zerolayer costs list|set`: the operator's resource rates,
// the cost side of `report --all-tenants`.
func runCosts(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("costs"), args)
	if err != nil {
		return err
	}
	fs := newFlags("costs " + sub)
	dbURL := addDatabaseFlag(fs, "")
	var add finance.ResourceRates
	var from *string
	var engine, kv, tool *string
	if sub == "set" {
		from = fs.String("effective-from", "", "when the rates take effect: 2026-12-01 (UTC) or RFC 3339 (required)")
		fs.StringVar(&add.Currency, "currency", "USD", "currency of the rates")
		engine = fs.String("engine-ms", "", "cost of one millisecond of engine time (required)")
		kv = fs.String("kv-mib-ms", "", "cost of one MiB of KV memory held for a millisecond (required)")
		tool = fs.String("tool-ms", "", "cost of one millisecond of tool execution (required)")
		fs.StringVar(&add.Note, "note", "", "why (e.g. the hardware price it comes from)")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sub == "set" {
		if *from == "" || *engine == "" || *kv == "" || *tool == "" {
			return usagef("give --effective-from, --engine-ms, --kv-mib-ms and --tool-ms")
		}
		if add.EffectiveAt, err = parseReportTime(*from); err != nil {
			return usagef("--effective-from: %v", err)
		}
		for _, f := range []struct {
			name string
			s    *string
			d    *decimal.Decimal
		}{{"engine-ms", engine, &add.EngineMs}, {"kv-mib-ms", kv, &add.KVMiBMs}, {"tool-ms", tool, &add.ToolMs}} {
			if *f.d, err = decimal.NewFromString(*f.s); err != nil {
				return usagef("--%s %q is not a decimal", f.name, *f.s)
			}
		}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if sub == "set" {
		if _, err := finance.AddResourceRates(ctx, pool, add); err != nil {
			return err
		}
	}
	rates, err := finance.ListResourceRates(ctx, pool)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tFROM\tCURRENCY\tENGINE/MS\tKV/MIB·MS\tTOOL/MS\tNOTE")
	for _, r := range rates {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.EffectiveAt.Format(time.RFC3339), r.Currency, r.EngineMs, r.KVMiBMs, r.ToolMs, r.Note)
	}
	return tw.Flush()
}
