package finance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// Report is one tenant's billing over a period, with exact (unrounded)
// costs. Its basis says which charges it covers: "usage", the rated jobs
// whose usage was created in [From, To) (BuildReport); or "period", the
// charges invoiced in one billing month, with its credits and adjustments
// (BuildPeriodReport), which is what the month's invoice bills: Net equals
// the invoice's subtotal.
type Report struct {
	// Tenant is the tenant reported on.
	Tenant string `json:"tenant"`
	// Basis is "usage" or "period" (see Report).
	Basis string `json:"basis"`
	// Period is the billing month (2006-01) of a period report.
	Period string `json:"period,omitempty"`
	// Invoice is the number of the period's invoice; "" while it is open.
	Invoice string `json:"invoice,omitempty"`
	// From and To bound the period: From <= created_at < To (for a
	// period report, the month's bounds; its late charges of earlier
	// months are in too).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Currency is the charges' currency; empty when there are none.
	Currency string `json:"currency"`
	// Total covers every rated job; its Cost is the cost by dimension.
	Total Group `json:"total"`
	// InvoiceTotal is Net rounded for an invoice (price.RoundInvoice), before
	// tax.
	InvoiceTotal string `json:"invoice_total"`
	// ByModel, ByKind, ByPriority and ByBucket split the total, largest
	// cost first; each adds up to Total. ByKind keeps the embedding jobs
	// (Key "embedding") apart from the generations ("generation").
	ByModel    []Group `json:"by_model"`
	ByKind     []Group `json:"by_kind"`
	ByPriority []Group `json:"by_priority"`
	ByBucket   []Group `json:"by_bucket"`
	// ByTag has one group per value tag. A job with several tags counts in
	// each, so these overlap and do not add up to Total.
	ByTag []Group `json:"by_tag"`
	// Untagged covers the jobs with no tag; with the tag groups it shows
	// which traffic carries which cost (the cross-subsidy view).
	Untagged Group `json:"untagged"`
	// ByTagSet splits the total by each job's combination of tags
	// ("effective_service+high_latency_risk", "" for none): unlike ByTag
	// it adds up to Total.
	ByTagSet []Group `json:"by_tag_set"`
	// ByBook splits the total by the price book that rated the charges
	// (Key "pb7 acme/tiny v2": the name is unique).
	ByBook []Group `json:"by_price_book"`
	// ByDay splits the total by the UTC day of the usage.
	ByDay []Group `json:"by_day"`
	// Credits are a period report's credits and adjustments; CreditsTotal
	// their sum (negative for credits).
	Credits      []Credit        `json:"credits,omitempty"`
	CreditsTotal decimal.Decimal `json:"credits_total_exact"`
	// Net is Total.Cost.Total + CreditsTotal: the invoice's subtotal,
	// before tax.
	Net decimal.Decimal `json:"net_exact"`
	// Unrated counts the period's usage records not rated yet (normally
	// the last few seconds' records); they are in no other figure.
	Unrated int64 `json:"unrated"`
	// Daily is the daily trend, oldest first: for a usage report, the
	// tenant's rollups (usage_daily) of the UTC days the period covers,
	// which catch up shortly after rating, so the last day may lag the
	// totals; for a period report, the month's charges by the UTC day of
	// their usage (late usage of earlier months on its own days), which
	// add up to Total.
	Daily []ledger.DailyTotal `json:"daily"`
}

// Group is the jobs sharing one value of a dimension.
type Group struct {
	// Key is the value: a model, a priority, a bucket or a tag; empty
	// for Total and Untagged.
	Key string `json:"key,omitempty"`
	// Jobs counts the jobs.
	Jobs int64 `json:"jobs"`
	// InputTokens, OutputTokens and CachedInputTokens add up the jobs'.
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	// EmbeddingInputTokens is the part of InputTokens that embedding jobs
	// used, priced in Cost.EmbeddingInput.
	EmbeddingInputTokens int64 `json:"embedding_input_tokens"`
	// Cost adds up the jobs' charges, per dimension.
	Cost price.Breakdown `json:"cost"`
}

// The aggregate columns every report query selects after its key (the
// total is the tenth; the embedding columns come last).
const groupColumns = `count(*),
	coalesce(sum(u.input_tokens), 0)::bigint, coalesce(sum(u.output_tokens), 0)::bigint, coalesce(sum(u.cached_input_tokens), 0)::bigint,
	coalesce(sum(c.cost_input), 0), coalesce(sum(c.cost_cached_input), 0), coalesce(sum(c.cost_output), 0), coalesce(sum(c.cost_ttft), 0),
	coalesce(sum(c.cost_tool), 0), coalesce(sum(c.total), 0),
	coalesce(sum(u.input_tokens) FILTER (WHERE u.kind = 'embedding'), 0)::bigint, coalesce(sum(c.cost_embedding_input), 0)`

func scanGroup(row pgx.Row, withKey bool) (Group, error) {
	var g Group
	dest := []any{&g.Jobs, &g.InputTokens, &g.OutputTokens, &g.CachedInputTokens,
		&g.Cost.Input, &g.Cost.CachedInput, &g.Cost.Output, &g.Cost.TTFT, &g.Cost.Tool, &g.Cost.Total,
		&g.EmbeddingInputTokens, &g.Cost.EmbeddingInput}
	if withKey {
		dest = append([]any{&g.Key}, dest...)
	}
	err := row.Scan(dest...)
	return g, err
}

// currencyOf returns the one currency of the charges selected by from
// (FROM … WHERE …, with args), "" when there are none, or, when there are
// several, all of them.
func currencyOf(ctx context.Context, db DB, from string, args ...any) (string, []string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT c.currency `+from+` ORDER BY 1`, args...)
	if err != nil {
		return "", nil, err
	}
	currencies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	switch {
	case err != nil:
		return "", nil, err
	case len(currencies) == 0:
		return "", nil, nil
	case len(currencies) == 1:
		return currencies[0], nil, nil
	}
	return "", currencies, nil
}

// BuildReport reads tenant's report of the usage created in [from, to)
// from db (a pool, or a transaction for a consistent snapshot: use
// REPEATABLE READ). It returns ledger.ErrUnknownTenant for a tenant billing has
// never heard of, and ErrMixedCurrency if the period's charges are in more
// than one currency. A known tenant's period without usage is an empty
// report.
func BuildReport(ctx context.Context, db DB, tenant string, from, to time.Time) (*Report, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("billing: report period [%s, %s) is empty; from must be before to", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	r := &Report{Tenant: tenant, Basis: "usage", From: from.UTC(), To: to.UTC()}
	sel := reportSelection{
		charges: `FROM charges c JOIN usage u USING (tenant_id, job_id) WHERE u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3`,
		args:    []any{tenant, from, to},
	}
	return buildReport(ctx, db, r, sel)
}

// BuildPeriodReport reads tenant's report of the billing month period
// (2006-01): the charges invoiced in it (its usage, and late usage of
// earlier months rated after those were invoiced) and its credits and
// adjustments. Its Net is the month's invoice subtotal.
func BuildPeriodReport(ctx context.Context, db DB, tenant, period string) (*Report, error) {
	return BuildPeriodReportIn(ctx, db, tenant, period, "")
}

// BuildPeriodReportIn is BuildPeriodReport of the charges and credits in
// currency only ("" for all, which must then be one): a month that bills
// two currencies (late usage priced before a currency change) has a
// document, and a report, per currency.
func BuildPeriodReportIn(ctx context.Context, db DB, tenant, period, currency string) (*Report, error) {
	m, err := ledger.ParsePeriod(period)
	if err != nil {
		return nil, err
	}
	if currency != "" {
		if err := price.ValidateCurrency(currency); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidFormat, err)
		}
	}
	r := &Report{Tenant: tenant, Basis: "period", Period: period, From: m, To: m.AddDate(0, 1, 0)}
	day := m.Format(time.DateOnly)
	sel := reportSelection{
		charges: `FROM charges c JOIN usage u USING (tenant_id, job_id) WHERE c.tenant_id = $1 AND c.period = $2::date AND ($3 = '' OR c.currency = $3)`,
		args:    []any{tenant, day, currency},
	}
	if err := ledger.CheckTenant(ctx, db, tenant); err != nil {
		return nil, err
	}
	if r.Invoice, err = ledger.ClosedBy(ctx, db, tenant, m); err != nil {
		return nil, err
	}
	if currency != "" {
		if inv, err := GetPeriodInvoice(ctx, db, tenant, period, currency); err == nil {
			r.Invoice = inv.Number
		} else {
			r.Invoice = ""
		}
	}
	credits, err := ListCredits(ctx, db, tenant, period)
	if err != nil {
		return nil, err
	}
	for _, c := range credits {
		if currency == "" || c.Currency == currency {
			r.Credits = append(r.Credits, c)
		}
	}
	return buildReport(ctx, db, r, sel)
}

// reportSelection selects a report's charges: charges is a FROM … WHERE …
// clause over charges c and usage u, with args ($1 the tenant).
type reportSelection struct {
	charges string
	args    []any
}

func buildReport(ctx context.Context, db DB, r *Report, sel reportSelection) (*Report, error) {
	tenant := r.Tenant
	if err := contracts.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if err := ledger.CheckTenant(ctx, db, tenant); err != nil {
		return nil, err
	}
	fail := func(err error) (*Report, error) {
		return nil, fmt.Errorf("billing: report of %s: %w", tenant, err)
	}
	args := sel.args
	cur, currencies, err := currencyOf(ctx, db, sel.charges, args...)
	if err != nil {
		return fail(err)
	}
	for _, c := range r.Credits {
		if cur == "" {
			cur = c.Currency
		}
		if c.Currency != cur && !slices.Contains(currencies, c.Currency) {
			currencies = append(currencies, cur, c.Currency)
		}
	}
	if currencies != nil {
		return nil, fmt.Errorf("%w: %s has charges in %v between %s and %s; report a shorter period, or one currency of a month (--currency)",
			ErrMixedCurrency, tenant, currencies, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	r.Currency = cur

	if r.Total, err = scanGroup(db.QueryRow(ctx, `SELECT `+groupColumns+` `+sel.charges, args...), false); err != nil {
		return fail(err)
	}
	r.CreditsTotal = decimal.Zero
	for _, c := range r.Credits {
		r.CreditsTotal = r.CreditsTotal.Add(c.Amount)
	}
	r.Net = r.Total.Cost.Total.Add(r.CreditsTotal)
	r.InvoiceTotal = price.DisplayAmount(r.Net, r.Currency)
	if r.Untagged, err = scanGroup(db.QueryRow(ctx, `SELECT `+groupColumns+` `+sel.charges+` AND cardinality(c.tags) = 0`, args...), false); err != nil {
		return fail(err)
	}
	tagFrom := strings.Replace(sel.charges, "WHERE", "CROSS JOIN LATERAL unnest(c.tags) AS t(tag) WHERE", 1)
	bookFrom := strings.Replace(sel.charges, "WHERE", "JOIN price_books pb ON pb.id = c.price_book_id WHERE", 1)
	for _, d := range []struct {
		dst   *[]Group
		from  string
		key   string
		order string
	}{
		{&r.ByModel, sel.charges, "u.model", "11 DESC, 1"},
		{&r.ByKind, sel.charges, "u.kind", "11 DESC, 1"},
		{&r.ByPriority, sel.charges, "u.priority", "11 DESC, 1"},
		{&r.ByBucket, sel.charges, "u.bucket", "11 DESC, 1"},
		{&r.ByTag, tagFrom, "t.tag", "11 DESC, 1"},
		{&r.ByTagSet, sel.charges, "array_to_string(c.tags, '+')", "11 DESC, 1"},
		{&r.ByBook, bookFrom, `'pb' || pb.id || ' ' || coalesce(pb.tenant_id, 'default') || '/' || coalesce(pb.model, 'any model') || ' v' || pb.version`, "1"},
		{&r.ByDay, sel.charges, `to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`, "1"},
	} {
		rows, err := db.Query(ctx, `SELECT `+d.key+`, `+groupColumns+` `+d.from+` GROUP BY 1 ORDER BY `+d.order, args...)
		if err != nil {
			return fail(err)
		}
		groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Group, error) { return scanGroup(row, true) })
		if err != nil {
			return fail(err)
		}
		*d.dst = groups
	}
	err = db.QueryRow(ctx, `SELECT count(*) FROM usage u LEFT JOIN charges c USING (tenant_id, job_id)
		WHERE c.job_id IS NULL AND u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3`, tenant, r.From, r.To).Scan(&r.Unrated)
	if err != nil {
		return fail(err)
	}
	if r.Basis == "period" {
		// A billing month bills late usage of earlier months too, which
		// the month's rollups do not hold: its trend comes from its
		// charges, by the day of their usage, and adds up to its total.
		r.Daily = []ledger.DailyTotal{}
		for _, g := range r.ByDay {
			r.Daily = append(r.Daily, ledger.DailyTotal{Tenant: tenant, Day: g.Key, Currency: r.Currency, Jobs: g.Jobs, InputTokens: g.InputTokens,
				OutputTokens: g.OutputTokens, CachedInputTokens: g.CachedInputTokens, EmbeddingInputTokens: g.EmbeddingInputTokens, Cost: g.Cost})
		}
		return r, nil
	}
	lastDay := r.To.Add(-time.Nanosecond).AddDate(0, 0, 1)
	if r.Daily, err = ledger.DailyTotals(ctx, db, tenant, r.From.Format(time.DateOnly), lastDay.Format(time.DateOnly)); err != nil {
		return fail(err)
	}
	return r, nil
}
