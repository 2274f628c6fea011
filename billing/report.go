package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/contracts"
)

// Report is one tenant's billing over a period: the rated jobs whose usage
// was created in [From, To), with exact (unrounded) costs.
type Report struct {
	// Tenant is the tenant reported on.
	Tenant string `json:"tenant"`
	// From and To bound the period: From <= created_at < To.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Currency is the charges' currency; empty when there are none.
	Currency string `json:"currency"`
	// Total covers every rated job; its Cost is the cost by dimension.
	Total Group `json:"total"`
	// InvoiceTotal is Total.Cost.Total rounded for an invoice
	// (RoundInvoice).
	InvoiceTotal string `json:"invoice_total"`
	// ByModel, ByPriority and ByBucket split the total, largest cost
	// first; each adds up to Total.
	ByModel    []Group `json:"by_model"`
	ByPriority []Group `json:"by_priority"`
	ByBucket   []Group `json:"by_bucket"`
	// ByTag has one group per value tag. A job with several tags counts in
	// each, so these overlap and do not add up to Total.
	ByTag []Group `json:"by_tag"`
	// Untagged covers the jobs with no tag; with the tag groups it shows
	// which traffic carries which cost (the cross-subsidy view).
	Untagged Group `json:"untagged"`
	// Unrated counts the period's usage records not rated yet (normally
	// the last few seconds' records); they are in no other figure.
	Unrated int64 `json:"unrated"`
	// Daily is the daily trend: the tenant's rollups (usage_daily) of the
	// UTC days the period covers, oldest first. The rollups catch up
	// shortly after rating, so the last day may lag the totals.
	Daily []DailyTotal `json:"daily"`
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
	// Cost adds up the jobs' charges, per dimension.
	Cost Breakdown `json:"cost"`
}

// The aggregate columns every report query selects after its key.
const groupColumns = `count(*),
	coalesce(sum(u.input_tokens), 0)::bigint, coalesce(sum(u.output_tokens), 0)::bigint, coalesce(sum(u.cached_input_tokens), 0)::bigint,
	coalesce(sum(c.cost_input), 0), coalesce(sum(c.cost_cached_input), 0), coalesce(sum(c.cost_output), 0), coalesce(sum(c.cost_ttft), 0),
	coalesce(sum(c.cost_tool), 0), coalesce(sum(c.total), 0)`

// The period's charges, with their usage; $1 tenant, $2 from, $3 to.
const chargesInPeriod = `FROM charges c JOIN usage u USING (tenant_id, job_id)
	WHERE u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3`

func scanGroup(row pgx.Row, withKey bool) (Group, error) {
	var g Group
	dest := []any{&g.Jobs, &g.InputTokens, &g.OutputTokens, &g.CachedInputTokens,
		&g.Cost.Input, &g.Cost.CachedInput, &g.Cost.Output, &g.Cost.TTFT, &g.Cost.Tool, &g.Cost.Total}
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

// BuildReport reads tenant's report for [from, to) from db (a pool, or a
// transaction for a consistent snapshot: use REPEATABLE READ). It returns
// ErrUnknownTenant for a tenant billing has never heard of, and
// ErrMixedCurrency if the period's charges are in more than one currency. A
// known tenant's period without usage is an empty report.
func BuildReport(ctx context.Context, db DB, tenant string, from, to time.Time) (*Report, error) {
	if err := contracts.ValidateTenant(tenant); err != nil {
		return nil, err
	}
	if err := checkTenant(ctx, db, tenant); err != nil {
		return nil, err
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("billing: report period [%s, %s) is empty; from must be before to", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	r := &Report{Tenant: tenant, From: from.UTC(), To: to.UTC()}
	args := []any{tenant, from, to}
	fail := func(err error) (*Report, error) {
		return nil, fmt.Errorf("billing: report of %s: %w", tenant, err)
	}

	cur, currencies, err := currencyOf(ctx, db, chargesInPeriod, args...)
	if err != nil {
		return fail(err)
	}
	if currencies != nil {
		return nil, fmt.Errorf("%w: %s has charges in %v between %s and %s; report a shorter period",
			ErrMixedCurrency, tenant, currencies, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	r.Currency = cur

	if r.Total, err = scanGroup(db.QueryRow(ctx, `SELECT `+groupColumns+` `+chargesInPeriod, args...), false); err != nil {
		return fail(err)
	}
	r.InvoiceTotal = RoundInvoice(r.Total.Cost.Total, r.Currency).StringFixedBank(MinorUnits(r.Currency))
	if r.Untagged, err = scanGroup(db.QueryRow(ctx, `SELECT `+groupColumns+` `+chargesInPeriod+` AND cardinality(c.tags) = 0`, args...), false); err != nil {
		return fail(err)
	}
	for _, d := range []struct {
		dst  *[]Group
		from string
		key  string
	}{
		{&r.ByModel, chargesInPeriod, "u.model"},
		{&r.ByPriority, chargesInPeriod, "u.priority"},
		{&r.ByBucket, chargesInPeriod, "u.bucket"},
		{&r.ByTag, `FROM charges c JOIN usage u USING (tenant_id, job_id) CROSS JOIN LATERAL unnest(c.tags) AS t(tag)
			WHERE u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3`, "t.tag"},
	} {
		rows, err := db.Query(ctx, `SELECT `+d.key+`, `+groupColumns+` `+d.from+` GROUP BY 1 ORDER BY 10 DESC, 1`, args...)
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
		WHERE c.job_id IS NULL AND u.tenant_id = $1 AND u.created_at >= $2 AND u.created_at < $3`, args...).Scan(&r.Unrated)
	if err != nil {
		return fail(err)
	}
	lastDay := to.UTC().Add(-time.Nanosecond).AddDate(0, 0, 1)
	if r.Daily, err = DailyTotals(ctx, db, tenant, from.UTC().Format(time.DateOnly), lastDay.Format(time.DateOnly)); err != nil {
		return fail(err)
	}
	return r, nil
}
