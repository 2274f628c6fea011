package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A billing period is a UTC calendar month, named "2006-01". A charge is
// invoiced in one period: its usage's month, or, when that month was
// invoiced (closed) before the usage was rated, the first open month after
// it. An invoiced period is locked: its charges are never re-rated and no
// credit is added to it.

// PeriodFormat is the layout of a period's name.
const PeriodFormat = "2006-01"

// ParsePeriod reads a period name such as "2026-11" and returns the first
// instant of the month, UTC.
func ParsePeriod(s string) (time.Time, error) {
	t, err := time.Parse(PeriodFormat, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: period %q is not a month such as 2026-11", ErrInvalidPeriod, s)
	}
	return t.UTC(), nil
}

// MonthOf returns the first instant of t's UTC month: the start of the
// billing period t falls in.
func MonthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// PeriodName is the name of the period starting at m (a MonthOf), as
// 2006-01.
func PeriodName(m time.Time) string { return m.UTC().Format(PeriodFormat) }

// periodLock is the advisory lock of a tenant's period ($1 tenant, $2
// period as 2006-01): charges, re-ratings and credits of the period are
// written under its shared side; closing the period takes the exclusive
// side, so that an invoice sees every charge committed before it and none
// lands in its period after it.
const periodLock = `hashtext('zl_period'), hashtext(current_schema() || '/' || $1 || '/' || $2)`

// periodKey is a tenant's period.
type periodKey struct {
	Tenant string
	Month  time.Time
}

// placement is where a charge of a usage month is invoiced.
type placement struct {
	Period time.Time
	// Note explains a charge placed after its usage's month ("" when not).
	Note string
}

// placeCharges returns, for each of keys (a tenant and the month of a
// usage record), the open period its charge goes in, holding the shared
// side of that period's lock for the rest of tx, so that the period cannot
// be closed before tx commits. It takes the locks of all keys with one
// statement and reads their invoices with one query; only a key whose
// month is invoiced (late usage) costs another round, for the months
// after it.
func placeCharges(ctx context.Context, tx pgx.Tx, keys []periodKey) (map[periodKey]placement, error) {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, comparePeriodKeys)
	keys = slices.Compact(keys)
	at := make(map[periodKey]time.Time, len(keys)) // the month each key is placed in so far
	closedBy := map[periodKey][]string{}
	pending := keys // keys whose month at[k] is not locked and checked yet
	for _, k := range keys {
		at[k] = k.Month
	}
	for len(pending) > 0 {
		pairs := make([][2]string, len(pending))
		for i, k := range pending {
			pairs[i] = [2]string{k.Tenant, PeriodName(at[k])}
		}
		if err := lockShared(ctx, tx, periodLock, pairs); err != nil {
			return nil, fmt.Errorf("billing: lock the periods of %d charges: %w", len(pending), err)
		}
		invoiced, err := invoicesOf(ctx, tx, pairs)
		if err != nil {
			return nil, err
		}
		var next []periodKey
		for _, k := range pending {
			if number, ok := invoiced[[2]string{k.Tenant, PeriodName(at[k])}]; ok {
				closedBy[k] = append(closedBy[k], PeriodName(at[k])+" by "+number)
				at[k] = at[k].AddDate(0, 1, 0)
				next = append(next, k)
			}
		}
		pending = next
	}
	out := make(map[periodKey]placement, len(keys))
	for _, k := range keys {
		p := placement{Period: at[k]}
		if c := closedBy[k]; len(c) > 0 {
			p.Note = fmt.Sprintf("usage of %s billed in %s: %s was invoiced before it was rated (%s)",
				PeriodName(k.Month), PeriodName(at[k]), PeriodName(k.Month), strings.Join(c, ", "))
		}
		out[k] = p
	}
	return out, nil
}

func comparePeriodKeys(a, b periodKey) int {
	if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
		return c
	}
	return a.Month.Compare(b.Month)
}

// invoicesOf returns the numbers of the invoices of pairs (tenant, period
// as 2006-01) that exist, by pair.
func invoicesOf(ctx context.Context, db DB, pairs [][2]string) (map[[2]string]string, error) {
	tenants, periods := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		tenants[i], periods[i] = p[0], p[1]+"-01"
	}
	rows, err := db.Query(ctx, `SELECT i.tenant_id, to_char(i.period, 'YYYY-MM'), i.number
		FROM invoices i JOIN unnest($1::text[], $2::date[]) AS q(tenant_id, period) USING (tenant_id, period)`, tenants, periods)
	if err != nil {
		return nil, fmt.Errorf("billing: look up the invoices of %d periods: %w", len(pairs), err)
	}
	out := map[[2]string]string{}
	var tenant, period, number string
	if _, err := pgx.ForEachRow(rows, []any{&tenant, &period, &number}, func() error {
		out[[2]string{tenant, period}] = number
		return nil
	}); err != nil {
		return nil, fmt.Errorf("billing: look up the invoices of %d periods: %w", len(pairs), err)
	}
	return out, nil
}

// ClosedBy returns the number of the invoice that closed tenant's period
// starting at month (a MonthOf), or "" while the period is open. A period
// is closed once it has an invoice: the ledger reads finance's invoices
// table for that and for nothing else.
func ClosedBy(ctx context.Context, db DB, tenant string, month time.Time) (string, error) {
	p := [2]string{tenant, PeriodName(month)}
	invoiced, err := invoicesOf(ctx, db, [][2]string{p})
	return invoiced[p], err
}

// LockPeriodToClose takes the exclusive side of the lock of tenant's
// period starting at month for the rest of tx, and returns the number of
// the invoice that closed the period already ("" when it is open). From
// then until tx ends no rating, re-rating or credit writes to the period,
// so that an invoice tx stores sees every charge committed before it, and
// none lands in its period after it (those go to the next open period).
// finance.CloseInvoice takes it before it reads the period's charges.
func LockPeriodToClose(ctx context.Context, tx pgx.Tx, tenant string, month time.Time) (string, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+periodLock+`)`, tenant, PeriodName(month)); err != nil {
		return "", err
	}
	return ClosedBy(ctx, tx, tenant, month)
}

// LockOpenPeriod takes the shared side of the lock of tenant's period
// (2006-01) for the rest of tx, as a rating does, and returns an error
// wrapping ErrPeriodLocked when the period is invoiced. A change to an
// open period's bill (finance.AddCredit) holds it while it writes, so that
// the period cannot be closed under it.
func LockOpenPeriod(ctx context.Context, tx pgx.Tx, tenant, period string) error {
	return lockOpenPeriods(ctx, tx, [][2]string{{tenant, period}})
}

// lockOpenPeriods takes the shared side of the locks of periods (tenant,
// period as 2006-01) for the rest of tx, with one statement, and returns
// an error wrapping ErrPeriodLocked naming the invoice of the first that
// is closed.
func lockOpenPeriods(ctx context.Context, tx pgx.Tx, periods [][2]string) error {
	if len(periods) == 0 {
		return nil
	}
	periods = slices.Compact(slices.SortedFunc(slices.Values(periods), compareKeys))
	if err := lockShared(ctx, tx, periodLock, periods); err != nil {
		return fmt.Errorf("billing: lock %d periods: %w", len(periods), err)
	}
	invoiced, err := invoicesOf(ctx, tx, periods)
	if err != nil {
		return err
	}
	for _, p := range periods {
		if number, ok := invoiced[p]; ok {
			return fmt.Errorf("%w: %s of %s is invoiced (%s)", ErrPeriodLocked, p[1], p[0], number)
		}
	}
	return nil
}
