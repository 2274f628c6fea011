package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
)

// runReport is `zerolayer report`: one tenant's billing over a period.
func runReport(ctx context.Context, args []string) error {
	fs := newFlags("report")
	tenant := fs.String("tenant", "", "tenant to report on (required, unless --all-tenants)")
	month := fs.String("month", "", "instead of --from/--to: the billing month (2026-11) as invoiced: its charges, late charges of earlier months, credits")
	allTenants := fs.Bool("all-tenants", false, "with --month: every tenant's invoices and credit notes of the month (drafts while open), per tenant, tag set and currency, with the resource cost (operators); with --from/--to: revenue against resource cost of the usage of a period")
	view := fs.String("view", "", "the view: with --format csv, one of "+strings.Join(finance.ReportViews, ", ")+" (default model); with --all-tenants --month, one of "+strings.Join(finance.OperatorMonthViews, ", ")+" (default tenant), in any format")
	outDir := fs.String("out", "", "write every view into this `DIR`, one file each: with --format csv, or with --all-tenants --month in any format")
	fromS := fs.String("from", "", "start of the period, included: 2026-11-01 (UTC) or an RFC 3339 time (required with --to, unless --batch or --batches)")
	toS := fs.String("to", "", "end of the period, excluded: 2026-12-01 (UTC) or an RFC 3339 time (required with --from, unless --batch or --batches)")
	formatS := fs.String("format", string(finance.FormatTable), "output format: table, csv, json or html (a page with charts; periods only)")
	dbURL := addDatabaseFlag(fs, "")
	batch := fs.String("batch", "", "instead of --from/--to: the cost of one batch (the jobs whose metadata batch_id is `ID`), one line per job")
	currency := fs.String("currency", "", "with --month: the charges and credits in this currency only (a month billed in two)")
	batches := fs.Bool("batches", false, "instead of --from/--to: the tenant's batches with their totals, most recent first")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *currency != "" && (*month == "" || *allTenants) {
		return usagef("--currency goes with --tenant T --month M")
	}
	if *allTenants {
		return reportAllTenants(ctx, *dbURL, *tenant, *month, *fromS, *toS, *batch != "" || *batches, *formatS, *view, *outDir)
	}
	if *view != "" && !slices.Contains(finance.ReportViews, *view) {
		return usagef("--view %q: use one of %s", *view, strings.Join(finance.ReportViews, ", "))
	}
	if (*view != "" || *outDir != "") && (*formatS != string(finance.FormatCSV) || *batch != "" || *batches) {
		return usagef("--view and --out go with --format csv, for a period or a month")
	}
	if *view == "" {
		*view = finance.ReportViews[0]
	}
	if *batch != "" || *batches || *month != "" {
		n := 0
		for _, b := range []bool{*fromS != "" || *toS != "", *batch != "", *batches, *month != ""} {
			if b {
				n++
			}
		}
		if n > 1 {
			return usagef("give one of --from/--to, --month, --batch or --batches")
		}
	}
	if *month != "" {
		if *tenant == "" {
			return usagef("--tenant is required")
		}
		return reportPeriod(ctx, *dbURL, *tenant, *month, *currency, *formatS, *view, *outDir)
	}
	if *batch != "" {
		return reportBatch(ctx, *dbURL, *tenant, *batch, *formatS)
	}
	if *batches {
		return reportBatches(ctx, *dbURL, *tenant, *formatS)
	}
	if *tenant == "" {
		return usagef("--tenant is required (or --all-tenants)")
	}
	if *fromS == "" || *toS == "" {
		return usagef("give a period, --from and --to (or --month M, --batch ID, or --batches)")
	}
	from, to, err := parseReportPeriod(*fromS, *toS)
	if err != nil {
		return err
	}
	pool, format, err := openReport(ctx, *dbURL, *tenant, *formatS)
	if err != nil {
		return err
	}
	defer pool.Close()
	r, err := inSnapshot(ctx, pool, func(tx pgx.Tx) (*finance.Report, error) { return finance.BuildReport(ctx, tx, *tenant, from, to) })
	if err != nil {
		return err
	}
	return writeReport(r, format, *view, *outDir)
}

// inSnapshot runs build in one read-only repeatable-read transaction, so
// that every figure of a report covers the same charges. A database
// without the billing tables gets a hint to migrate it.
func inSnapshot[T any](ctx context.Context, pool *pgxpool.Pool, build func(pgx.Tx) (T, error)) (T, error) {
	var r T
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		r, err = build(tx)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		err = fmt.Errorf("%w (a database never migrated? run 'zerolayer migrate up')", err)
	}
	return r, err
}

// undefinedTable is PostgreSQL's SQLSTATE for a missing table.
const undefinedTable = "42P01"

// openReport checks the tenant and format of a batch report and opens the
// database.
func openReport(ctx context.Context, dbURL, tenant, formatS string) (*pgxpool.Pool, finance.Format, error) {
	if tenant == "" {
		return nil, "", usagef("--tenant is required")
	}
	format, err := finance.ParseFormat(formatS)
	if err != nil {
		return nil, "", usagef("--format: %v", err)
	}
	pool, err := openDB(ctx, dbURL)
	return pool, format, err
}

// reportBatch writes the report of one batch.
func reportBatch(ctx context.Context, dbURL, tenant, batch, formatS string) error {
	pool, format, err := openReport(ctx, dbURL, tenant, formatS)
	if err != nil {
		return err
	}
	defer pool.Close()
	r, err := inSnapshot(ctx, pool, func(tx pgx.Tx) (*finance.BatchReport, error) { return finance.BuildBatchReport(ctx, tx, tenant, batch) })
	if err != nil {
		return err
	}
	return r.Write(stdout, format)
}

// reportBatches lists the tenant's batch totals (usage_batches).
func reportBatches(ctx context.Context, dbURL, tenant, formatS string) error {
	pool, format, err := openReport(ctx, dbURL, tenant, formatS)
	if err != nil {
		return err
	}
	defer pool.Close()
	totals, err := inSnapshot(ctx, pool, func(tx pgx.Tx) ([]ledger.BatchTotal, error) { return ledger.BatchTotals(ctx, tx, tenant) })
	if err != nil {
		return err
	}
	return finance.WriteBatchTotals(stdout, totals, format)
}

// parseReportPeriod reads --from and --to (parseReportTime), which must
// make a period that is not empty; its errors are usage errors.
func parseReportPeriod(fromS, toS string) (from, to time.Time, err error) {
	if from, err = parseReportTime(fromS); err != nil {
		return from, to, usagef("--from: %v", err)
	}
	if to, err = parseReportTime(toS); err != nil {
		return from, to, usagef("--to: %v", err)
	}
	if !from.Before(to) {
		return from, to, usagef("--from %s is not before --to %s", fromS, toS)
	}
	return from, to, nil
}

// parseReportTime reads a date (midnight UTC) or an RFC 3339 time.
func parseReportTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a date such as 2026-11-01 nor an RFC 3339 time", s)
	}
	return t, nil
}
