package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// LimitsChannel is the Postgres NOTIFY channel SetTenantLimits signals on
// (the payload is the tenant), so that a LimitsPublisher publishes the new
// limits at once rather than at its next round.
const LimitsChannel = "zl_tenant_limits"

// TenantLimits is one tenant's admission limits as stored in
// tenant_limits. A nil limit is no limit; zero admits nothing.
type TenantLimits struct {
	Tenant string
	// RequestsPerMinute caps the jobs admitted in any 60 seconds.
	RequestsPerMinute *int64
	// TokensPerMinute caps prompt + max_tokens admitted in any 60 seconds.
	TokensPerMinute *int64
	// MaxConcurrent caps the jobs in flight at one admitter.
	MaxConcurrent *int64
	// MonthlySpend caps a UTC month's charges (plus the estimate of jobs
	// in flight), in Currency.
	MonthlySpend *decimal.Decimal
	// Currency is MonthlySpend's ISO 4217 code. Defaults to USD.
	Currency string
	// UpdatedAt is when the limits were last set.
	UpdatedAt time.Time
}

// Validate reports limits that cannot be stored, wrapping
// ErrInvalidLimits.
func (l TenantLimits) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidLimits, fmt.Sprintf(format, a...))
	}
	if err := contracts.ValidateTenant(l.Tenant); err != nil {
		return bad("%v", err)
	}
	for _, v := range []*int64{l.RequestsPerMinute, l.TokensPerMinute, l.MaxConcurrent} {
		if v != nil && *v < 0 {
			return bad("a limit is negative (%d); use 0 to admit nothing, or no limit", *v)
		}
	}
	if l.MonthlySpend != nil && l.MonthlySpend.IsNegative() {
		return bad("monthly spend %s is negative", l.MonthlySpend)
	}
	if err := price.ValidateCurrency(l.Currency); err != nil {
		return bad("%v", err)
	}
	return nil
}

// SetTenantLimits stores l as tenant's limits (all of them: a nil field
// removes that limit), creating the tenant if needed, and notifies
// LimitsChannel in the same transaction, so that the running billing
// service publishes them to ZL_LIMITS within moments. An empty Currency
// is USD.
func SetTenantLimits(ctx context.Context, db Beginner, l TenantLimits) (TenantLimits, error) {
	if l.Currency == "" {
		l.Currency = "USD"
	}
	if err := l.Validate(); err != nil {
		return TenantLimits{}, err
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := EnsureTenant(ctx, tx, l.Tenant, ""); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO tenant_limits (tenant_id, requests_per_minute, tokens_per_minute, max_concurrent, monthly_spend, currency, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, now())
			ON CONFLICT (tenant_id) DO UPDATE SET requests_per_minute = $2, tokens_per_minute = $3, max_concurrent = $4,
				monthly_spend = $5, currency = $6, updated_at = now()
			RETURNING updated_at`,
			l.Tenant, l.RequestsPerMinute, l.TokensPerMinute, l.MaxConcurrent, l.MonthlySpend, l.Currency).Scan(&l.UpdatedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, LimitsChannel, l.Tenant)
		return err
	})
	if err != nil {
		return TenantLimits{}, fmt.Errorf("billing: set the limits of %s: %w", l.Tenant, err)
	}
	l.UpdatedAt = l.UpdatedAt.UTC()
	return l, nil
}

const limitsColumns = `tenant_id, requests_per_minute, tokens_per_minute, max_concurrent, monthly_spend, currency, updated_at`

func scanLimits(row pgx.Row) (TenantLimits, error) {
	var l TenantLimits
	err := row.Scan(&l.Tenant, &l.RequestsPerMinute, &l.TokensPerMinute, &l.MaxConcurrent, &l.MonthlySpend, &l.Currency, &l.UpdatedAt)
	l.UpdatedAt = l.UpdatedAt.UTC()
	return l, err
}

// GetTenantLimits returns tenant's stored limits, or an error wrapping
// ErrNotFound when it has none.
func GetTenantLimits(ctx context.Context, db DB, tenant string) (TenantLimits, error) {
	l, err := scanLimits(db.QueryRow(ctx, `SELECT `+limitsColumns+` FROM tenant_limits WHERE tenant_id = $1`, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return TenantLimits{}, fmt.Errorf("%w: no limits for tenant %s", ErrNotFound, tenant)
	}
	if err != nil {
		return TenantLimits{}, fmt.Errorf("billing: read the limits of %s: %w", tenant, err)
	}
	return l, nil
}

// ListTenantLimits returns every tenant's stored limits, by tenant.
func ListTenantLimits(ctx context.Context, db DB) ([]TenantLimits, error) {
	rows, err := db.Query(ctx, `SELECT `+limitsColumns+` FROM tenant_limits ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("billing: list tenant limits: %w", err)
	}
	defer rows.Close()
	var out []TenantLimits
	for rows.Next() {
		l, err := scanLimits(rows)
		if err != nil {
			return nil, fmt.Errorf("billing: list tenant limits: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// LimitsSnapshot returns what billing publishes for l at now: the limits,
// the per-token price estimate (the tenant's book for any model in force,
// left empty when in another currency than l's), and the month-to-date
// spend: the charges in l's currency of the tenant's usage created this
// UTC month, plus the usage stored but not rated yet at the estimate.
func LimitsSnapshot(ctx context.Context, db DB, l TenantLimits, now time.Time) (contracts.TenantLimits, error) {
	now = now.UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	out := contracts.TenantLimits{Tenant: l.Tenant, RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute,
		MaxConcurrent: l.MaxConcurrent, Currency: l.Currency, Month: from.Format("2006-01"), UpdatedAt: now}
	if l.MonthlySpend != nil {
		s := l.MonthlySpend.String()
		out.MonthlySpend = &s
	}
	var pin, pout, pemb decimal.Decimal
	pb, err := EffectivePriceBook(ctx, db, l.Tenant, "", now)
	switch {
	case err == nil && pb.Currency == l.Currency:
		pin, pout, pemb = pb.PIn, pb.POut, pb.EmbeddingInputPrice()
		out.PriceIn, out.PriceOut, out.PriceEmbedIn = pin.String(), pout.String(), pemb.String()
	case err != nil && !errors.Is(err, ErrNoPriceBook):
		return contracts.TenantLimits{}, err
	}
	var charged decimal.Decimal
	var unratedIn, unratedOut, unratedEmbed int64
	if err := db.QueryRow(ctx, `
		SELECT coalesce(sum(c.total) FILTER (WHERE c.currency = $2), 0),
		       coalesce(sum(u.input_tokens) FILTER (WHERE c.job_id IS NULL AND u.kind <> 'embedding'), 0),
		       coalesce(sum(u.output_tokens) FILTER (WHERE c.job_id IS NULL), 0),
		       coalesce(sum(u.input_tokens) FILTER (WHERE c.job_id IS NULL AND u.kind = 'embedding'), 0)
		FROM usage u LEFT JOIN charges c ON c.tenant_id = u.tenant_id AND c.job_id = u.job_id
		WHERE u.tenant_id = $1 AND u.created_at >= $3 AND u.created_at < $4`,
		l.Tenant, l.Currency, from, from.AddDate(0, 1, 0)).Scan(&charged, &unratedIn, &unratedOut, &unratedEmbed); err != nil {
		return contracts.TenantLimits{}, fmt.Errorf("billing: month-to-date spend of %s: %w", l.Tenant, err)
	}
	mtd := charged.Add(pin.Mul(decimal.NewFromInt(unratedIn))).Add(pout.Mul(decimal.NewFromInt(unratedOut))).Add(pemb.Mul(decimal.NewFromInt(unratedEmbed)))
	out.MonthToDate = mtd.Round(12).String() // the contract allows 30 decimals; sums of products can carry more
	return out, nil
}
