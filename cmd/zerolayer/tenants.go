package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts/quota"
)

// runTenants sets and lists the per-tenant limits in Postgres; the running
// billing service publishes them to ZL_LIMITS at once (NOTIFY), where the
// gateways and workers enforce them. It also sets and shows the tenants'
// invoice details (set-billing, billing).
func runTenants(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("tenants"), args)
	if err != nil {
		return err
	}
	switch sub {
	case "set-billing":
		return tenantsSetBilling(ctx, args)
	case "billing":
		return tenantsBilling(ctx, args)
	}
	fs := newFlags("tenants " + sub)
	dbURL := addDatabaseFlag(fs, "")
	if sub == "limits" {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		pool, err := openDB(ctx, *dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		ls, err := ledger.ListTenantLimits(ctx, pool)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tRPM\tTPM\tCONCURRENCY\tMONTHLY SPEND\tUPDATED")
		for _, l := range ls {
			spend := "-"
			if l.MonthlySpend != nil {
				spend = l.MonthlySpend.String() + " " + l.Currency
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Tenant, limitText(l.RequestsPerMinute), limitText(l.TokensPerMinute),
				limitText(l.MaxConcurrent), spend, l.UpdatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	rpm := limitFlag(fs, "rpm", "jobs admitted per minute")
	tpm := limitFlag(fs, "tpm", "tokens (prompt + max_tokens) admitted per minute")
	conc := limitFlag(fs, "concurrency", "jobs in flight at once (per gateway or worker)")
	spendS := fs.String("monthly-spend", "", "monthly spend limit, a decimal amount such as 100.00, or none (keeps the current value when not given)")
	currency := fs.String("currency", "", "currency of --monthly-spend (default USD, or the current one)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{cmd: "tenants set-limits", msg: "give one tenant"}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, err := ledger.GetTenantLimits(ctx, pool, pos[0])
	if errors.Is(err, ledger.ErrNotFound) {
		l, err = ledger.TenantLimits{Tenant: pos[0]}, nil
	}
	if err != nil {
		return err
	}
	rpm.apply(&l.RequestsPerMinute)
	tpm.apply(&l.TokensPerMinute)
	conc.apply(&l.MaxConcurrent)
	switch *spendS {
	case "":
	case "none":
		l.MonthlySpend = nil
	default:
		d, err := decimal.NewFromString(*spendS)
		if err != nil {
			return usagef("--monthly-spend %q: want a decimal amount such as 100.00, or none", *spendS)
		}
		l.MonthlySpend = &d
	}
	if *currency != "" {
		l.Currency = *currency
	}
	if l, err = ledger.SetTenantLimits(ctx, pool, l); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer tenants set-limits: %s: rpm %s, tpm %s, concurrency %s, monthly spend %s; a running billing publishes them to the gateways and workers within moments\n",
		l.Tenant, limitText(l.RequestsPerMinute), limitText(l.TokensPerMinute), limitText(l.MaxConcurrent), spendText(l))
	return nil
}

// tenantsSetBilling is `zerolayer tenants set-billing`: the invoice
// details of a tenant, the flags not given keeping their value.
func tenantsSetBilling(ctx context.Context, args []string) error {
	fs := newFlags("tenants set-billing")
	name := fs.String("name", "", "legal `NAME` billed (default: the tenant id)")
	address := fs.String("address", "", "postal `ADDRESS`; \\n starts a new line")
	email := fs.String("email", "", "`EMAIL` address invoices are sent to")
	taxID := fs.String("tax-id", "", "the customer's VAT or tax `NUMBER`")
	taxRate := fs.String("tax-rate", "", "tax `RATE` applied to each invoice's subtotal: 0.2 is 20 %, in [0, 1) (default 0 for a new tenant)")
	taxRounding := fs.String("tax-rounding", "", "how tax is rounded: invoice (rate × the subtotal of rounded lines, rounded once; the default) or line (each line's tax rounded, then added up)")
	terms := fs.Int("terms-days", 0, "payment terms: `DAYS` from issue to the due date, 0–365 (default 30 for a new tenant)")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one tenant")
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var rate decimal.Decimal
	if given["tax-rate"] {
		if rate, err = decimal.NewFromString(*taxRate); err != nil {
			return usagef("--tax-rate %q: want a decimal such as 0.2 (20 %%)", *taxRate)
		}
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	b, err := finance.GetTenantBilling(ctx, pool, pos[0])
	if errors.Is(err, ledger.ErrUnknownTenant) {
		b, err = finance.TenantBilling{Tenant: pos[0], PaymentTermsDays: 30}, nil
	}
	if err != nil {
		return err
	}
	if given["name"] {
		b.Customer.Name = *name
	}
	if given["address"] {
		b.Customer.Address = strings.ReplaceAll(*address, `\n`, "\n")
	}
	if given["email"] {
		b.Customer.Email = *email
	}
	if given["tax-id"] {
		b.Customer.TaxID = *taxID
	}
	if given["tax-rate"] {
		b.TaxRate = rate
	}
	if given["tax-rounding"] {
		b.TaxRounding = *taxRounding
	}
	if given["terms-days"] {
		b.PaymentTermsDays = *terms
	}
	if err := finance.SetTenantBilling(ctx, pool, b); err != nil {
		return err
	}
	if b, err = finance.GetTenantBilling(ctx, pool, b.Tenant); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer tenants set-billing: %s: stored; invoices already issued keep the details they were issued with\n", b.Tenant)
	return writeTenantBilling(b, format)
}

// tenantsBilling is `zerolayer tenants billing`: a tenant's invoice
// details.
func tenantsBilling(ctx context.Context, args []string) error {
	fs := newFlags("tenants billing")
	formatS := fs.String("format", "table", "output format: table or json")
	dbURL := addDatabaseFlag(fs, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one tenant")
	}
	format, err := parseBookFormat(*formatS)
	if err != nil {
		return err
	}
	pool, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	b, err := finance.GetTenantBilling(ctx, pool, pos[0])
	if err != nil {
		return err
	}
	return writeTenantBilling(b, format)
}

// writeTenantBilling writes a tenant's invoice details, one per line in a
// table (the address's lines indented under its first).
func writeTenantBilling(b finance.TenantBilling, format finance.Format) error {
	if format == finance.FormatJSON {
		return writeJSON(b)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TENANT\t%s\nNAME\t%s\n", b.Tenant, b.Customer.Name)
	for i, line := range strings.Split(b.Customer.Address, "\n") {
		label := ""
		if i == 0 {
			label = "ADDRESS"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, line)
	}
	fmt.Fprintf(tw, "EMAIL\t%s\nTAX ID\t%s\nTAX RATE\t%s\nTAX ROUNDING\tper %s\nTERMS\t%d days\n", b.Customer.Email, b.Customer.TaxID, b.TaxRate,
		cmp.Or(b.TaxRounding, finance.TaxPerInvoice), b.PaymentTermsDays)
	return tw.Flush()
}

// limitValue is a limit flag: unset (keep), "none" (no limit) or N ≥ 0.
type limitValue struct {
	set  bool
	none bool
	n    int64
}

func limitFlag(fs *flag.FlagSet, name, what string) *limitValue {
	v := &limitValue{}
	fs.Var(v, name, "limit on "+what+": N (0 admits nothing) or none (keeps the current value when not given)")
	return v
}

func (v *limitValue) String() string { return "" }

func (v *limitValue) Set(s string) error {
	v.set = true
	if s == "none" {
		v.none = true
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a whole number ≥ 0, or none")
	}
	v.n = n
	return nil
}

// apply writes the flag's value into *p when it was given.
func (v *limitValue) apply(p **int64) {
	switch {
	case !v.set:
	case v.none:
		*p = nil
	default:
		n := v.n
		*p = &n
	}
}

func limitText(v *int64) string {
	if v == nil {
		return "none"
	}
	return strconv.FormatInt(*v, 10)
}

func spendText(l ledger.TenantLimits) string {
	if l.MonthlySpend == nil {
		return "none"
	}
	return strings.TrimSpace(l.MonthlySpend.String() + " " + l.Currency)
}

// startQuota starts the admission check of tenant limits of a gateway or
// worker (domain) on nc, registering its metrics with reg; stop stops it.
func startQuota(ctx context.Context, nc *nats.Conn, domain string, reg prometheus.Registerer, log *slog.Logger) (q *quota.Checker, stop func(), err error) {
	q, err = quota.New(nc, quota.Config{Domain: domain, ReleaseOnResults: domain == "gateway", Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if err := q.Register(reg); err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := q.Start(sctx); err != nil {
		return nil, nil, fmt.Errorf("tenant limits: %w", err)
	}
	return q, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		q.Stop(ctx)
	}, nil
}
