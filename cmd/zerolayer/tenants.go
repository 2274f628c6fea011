package main

import (
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

	"github.com/zerolayer/zerolayer/billing"
	"github.com/zerolayer/zerolayer/contracts/quota"
)

// runTenants sets and lists the per-tenant limits in Postgres; the running
// billing service publishes them to ZL_LIMITS at once (NOTIFY), where the
// gateways and workers enforce them.
func runTenants(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("tenants"), args)
	if err != nil {
		return err
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
		ls, err := billing.ListTenantLimits(ctx, pool)
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
	l, err := billing.GetTenantLimits(ctx, pool, pos[0])
	if errors.Is(err, billing.ErrNotFound) {
		l, err = billing.TenantLimits{Tenant: pos[0]}, nil
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
	if l, err = billing.SetTenantLimits(ctx, pool, l); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer tenants set-limits: %s: rpm %s, tpm %s, concurrency %s, monthly spend %s; a running billing publishes them to the gateways and workers within moments\n",
		l.Tenant, limitText(l.RequestsPerMinute), limitText(l.TokensPerMinute), limitText(l.MaxConcurrent), spendText(l))
	return nil
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

func spendText(l billing.TenantLimits) string {
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
