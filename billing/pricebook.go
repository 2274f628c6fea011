package billing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/contracts"
)

// Validate reports a price book that cannot be stored, wrapping
// ErrInvalidPriceBook. ID and Version are not checked: CreatePriceBook
// assigns them.
func (pb PriceBook) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPriceBook, fmt.Sprintf(format, a...))
	}
	if pb.Tenant != "" {
		if err := contracts.ValidateTenant(pb.Tenant); err != nil {
			return bad("%v", err)
		}
	}
	switch {
	case pb.EffectiveAt.IsZero():
		return bad("EffectiveAt is not set; give the time the prices start to apply")
	case ValidateCurrency(pb.Currency) != nil:
		return bad("%v", ValidateCurrency(pb.Currency))
	case pb.PIn.IsNegative() || pb.POut.IsNegative() || pb.PTTFT.IsNegative() || pb.PTool.IsNegative():
		return bad("prices must not be negative (p_in %s, p_out %s, p_ttft %s, p_tool %s)", pb.PIn, pb.POut, pb.PTTFT, pb.PTool)
	case pb.PCachedIn != nil && pb.PCachedIn.IsNegative():
		return bad("the cached input price %s is negative", pb.PCachedIn)
	case pb.MultHigh.IsNegative() || pb.MultNormal.IsNegative() || pb.MultLow.IsNegative() || pb.MultBatch.IsNegative():
		return bad("multipliers must be positive (high %s, normal %s, low %s, batch %s; 0 means 1)", pb.MultHigh, pb.MultNormal, pb.MultLow, pb.MultBatch)
	case pb.EffectiveTo != nil && !pb.EffectiveTo.After(pb.EffectiveAt):
		return bad("the book ends (%s) before it starts (%s)", pb.EffectiveTo.UTC().Format(time.RFC3339), pb.EffectiveAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// CreatePriceBook stores pb as the next version of its (Tenant, Model)
// scope and returns it with its ID and Version. The tenant is created if
// needed. Charges already made keep the version they were rated with;
// usage created at or after pb.EffectiveAt and rated afterwards uses pb,
// and a re-rating (RerateArgs) applies it to charges already made. Two
// concurrent creations in one scope can collide on the version; the loser
// gets a unique-violation error and may retry.
func CreatePriceBook(ctx context.Context, db Beginner, pb PriceBook) (PriceBook, error) {
	if err := pb.Validate(); err != nil {
		return PriceBook{}, err
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if pb.Tenant != "" {
			if err := EnsureTenant(ctx, tx, pb.Tenant, ""); err != nil {
				return err
			}
		}
		if err := checkCurrencyChange(ctx, tx, pb); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO price_books (tenant_id, model, version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note,
				p_cached_in, mult_high, mult_normal, mult_low, mult_batch, effective_to)
			SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
			FROM price_books
			WHERE tenant_id IS NOT DISTINCT FROM $1 AND model IS NOT DISTINCT FROM $2
			RETURNING id, version, effective_at`,
			nullIfEmpty(pb.Tenant), nullIfEmpty(pb.Model), pb.EffectiveAt, pb.Currency,
			pb.PIn, pb.POut, pb.PTTFT, pb.PTool, pb.Note,
			pb.PCachedIn, orOne(pb.MultHigh), orOne(pb.MultNormal), orOne(pb.MultLow), orOne(pb.MultBatch), pb.EffectiveTo,
		).Scan(&pb.ID, &pb.Version, &pb.EffectiveAt)
	})
	if err != nil {
		return PriceBook{}, fmt.Errorf("billing: create price book: %w", err)
	}
	pb.MultHigh, pb.MultNormal, pb.MultLow, pb.MultBatch = orOne(pb.MultHigh), orOne(pb.MultNormal), orOne(pb.MultLow), orOne(pb.MultBatch)
	pb.EffectiveAt = pb.EffectiveAt.UTC()
	return pb, nil
}

// checkCurrencyChange refuses a book that changes the currency of the
// usage it prices at a time other than the first instant of a UTC month:
// a month is invoiced in the currency of its prices, and a change within
// it would leave its first days in one currency and the rest in another.
// The books compared are those in force just before pb.EffectiveAt that
// pb takes over from or sits beside: for a tenant's book, the tenant's
// own books and the default books (of pb's model, or of any model); for a
// default book, the default books.
func checkCurrencyChange(ctx context.Context, tx pgx.Tx, pb PriceBook) error {
	at := pb.EffectiveAt.UTC()
	if at.Equal(monthOf(at)) {
		return nil
	}
	books, err := ListPriceBooks(ctx, tx, PriceBookFilter{Tenant: pb.Tenant, Model: pb.Model, At: at.Add(-time.Microsecond)})
	if err != nil {
		return err
	}
	for _, o := range books {
		if pb.Tenant == "" && o.Tenant != "" {
			continue
		}
		if o.Currency != pb.Currency {
			who := cmp.Or(pb.Tenant, "the default books' tenants")
			return fmt.Errorf("%w: %s is priced in %s until %s (%s, %s); a book in %s must take effect at the start of a month, such as %s, so that no month is billed in two currencies",
				ErrCurrencyChange, who, o.Currency, at.Format(time.RFC3339), o.Name(), o.Scope(), pb.Currency,
				monthOf(at).AddDate(0, 1, 0).Format(time.RFC3339))
		}
	}
	return nil
}

const priceBookColumns = `id, coalesce(tenant_id, ''), coalesce(model, ''), version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note,
	p_cached_in, mult_high, mult_normal, mult_low, mult_batch, effective_to`

func scanPriceBook(row pgx.Row) (PriceBook, error) {
	var pb PriceBook
	err := row.Scan(pb.dest()...)
	pb.utc()
	return pb, err
}

// dest returns where to scan priceBookColumns into.
func (pb *PriceBook) dest() []any {
	return []any{&pb.ID, &pb.Tenant, &pb.Model, &pb.Version, &pb.EffectiveAt, &pb.Currency, &pb.PIn, &pb.POut, &pb.PTTFT, &pb.PTool, &pb.Note,
		&pb.PCachedIn, &pb.MultHigh, &pb.MultNormal, &pb.MultLow, &pb.MultBatch, &pb.EffectiveTo}
}

// utc puts pb's times in UTC, as scanned from the database.
func (pb *PriceBook) utc() {
	pb.EffectiveAt = pb.EffectiveAt.UTC()
	if pb.EffectiveTo != nil {
		t := pb.EffectiveTo.UTC()
		pb.EffectiveTo = &t
	}
}

// EffectivePriceBook returns the price book that prices usage of tenant's
// model created at the given time. It looks in the most specific scope
// first: the tenant's book for the model, then the tenant's book for any
// model, then the default book for the model, then the default book for
// any model. A scope's book at a time is its latest effective at or
// before it (the highest version on a tie); when that book has ended
// (EffectiveTo at or before the time) the scope has none, and the next
// scope is looked in: a later version replaces the earlier ones for good,
// and ending it does not bring them back. It returns ErrNoPriceBook when
// no scope has one.
func EffectivePriceBook(ctx context.Context, db DB, tenant, model string, at time.Time) (PriceBook, error) {
	books, err := effectivePriceBooks(ctx, db, []bookFor{{tenant, model, at}})
	if err != nil {
		return PriceBook{}, err
	}
	if books[0] == nil {
		return PriceBook{}, noPriceBook(tenant, model, at)
	}
	return *books[0], nil
}

// bookFor is what picks the book in force: usage of Tenant's Model
// created At.
type bookFor struct {
	Tenant, Model string
	At            time.Time
}

func noPriceBook(tenant, model string, at time.Time) error {
	return fmt.Errorf("%w: tenant %s, model %s, at %s", ErrNoPriceBook, tenant, model, at.UTC().Format(time.RFC3339Nano))
}

// effectivePriceBooks looks up, with one query, the book EffectivePriceBook
// returns for each of qs; nil where there is none.
func effectivePriceBooks(ctx context.Context, db DB, qs []bookFor) ([]*PriceBook, error) {
	tenants, models, ats := make([]string, len(qs)), make([]string, len(qs)), make([]time.Time, len(qs))
	for i, q := range qs {
		tenants[i], models[i], ats[i] = q.Tenant, q.Model, q.At
	}
	rows, err := db.Query(ctx, `
		SELECT q.i, pb.*
		FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS q(tenant, model, at, i)
		CROSS JOIN LATERAL (
			SELECT `+priceBookColumns+`
			FROM (
				SELECT DISTINCT ON (tenant_id IS NULL, model IS NULL) *
				FROM price_books
				WHERE (tenant_id = q.tenant OR tenant_id IS NULL)
				  AND (model = q.model OR model IS NULL)
				  AND effective_at <= q.at
				ORDER BY tenant_id IS NULL, model IS NULL, effective_at DESC, version DESC) latest
			WHERE effective_to IS NULL OR effective_to > q.at
			ORDER BY tenant_id IS NULL, model IS NULL
			LIMIT 1) pb`, tenants, models, ats)
	if err != nil {
		return nil, fmt.Errorf("billing: look up price books: %w", err)
	}
	out := make([]*PriceBook, len(qs))
	for rows.Next() {
		var i int
		pb := new(PriceBook)
		if err := rows.Scan(append([]any{&i}, pb.dest()...)...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("billing: look up price books: %w", err)
		}
		pb.utc()
		out[i-1] = pb
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("billing: look up price books: %w", err)
	}
	return out, nil
}

// GetPriceBook returns the stored price book id, or an error wrapping
// ErrNotFound.
func GetPriceBook(ctx context.Context, db DB, id int64) (PriceBook, error) {
	pb, err := scanPriceBook(db.QueryRow(ctx, `SELECT `+priceBookColumns+` FROM price_books WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return PriceBook{}, fmt.Errorf("%w: price book %d", ErrNotFound, id)
	}
	if err != nil {
		return PriceBook{}, fmt.Errorf("billing: read price book %d: %w", id, err)
	}
	return pb, nil
}

// appliesTo reports whether pb may price usage of tenant's model.
func (pb PriceBook) appliesTo(tenant, model string) bool {
	return (pb.Tenant == "" || pb.Tenant == tenant) && (pb.Model == "" || pb.Model == model)
}

// PriceBookFilter selects price books for ListPriceBooks; zero fields
// select everything.
type PriceBookFilter struct {
	// Tenant selects the tenant's own books and the default books.
	Tenant string
	// Model selects the model's books and the books of any model.
	Model string
	// At, when set, keeps only the books effective at that time: for each
	// scope, the one EffectivePriceBook would use in it.
	At time.Time
}

// ListPriceBooks returns the books f selects, by scope (default books
// first) and then version.
func ListPriceBooks(ctx context.Context, db DB, f PriceBookFilter) ([]PriceBook, error) {
	q := `SELECT ` + priceBookColumns + ` FROM price_books
		WHERE ($1 = '' OR tenant_id = $1 OR tenant_id IS NULL) AND ($2 = '' OR model = $2 OR model IS NULL)`
	args := []any{f.Tenant, f.Model}
	if !f.At.IsZero() {
		q = `SELECT ` + priceBookColumns + ` FROM (
			SELECT DISTINCT ON (coalesce(tenant_id, ''), coalesce(model, '')) *
			FROM price_books
			WHERE ($1 = '' OR tenant_id = $1 OR tenant_id IS NULL) AND ($2 = '' OR model = $2 OR model IS NULL)
			  AND effective_at <= $3
			ORDER BY coalesce(tenant_id, ''), coalesce(model, ''), effective_at DESC, version DESC) latest
			WHERE effective_to IS NULL OR effective_to > $3`
		args = append(args, f.At)
	}
	rows, err := db.Query(ctx, q+` ORDER BY tenant_id NULLS FIRST, model NULLS FIRST, version`, args...)
	if err != nil {
		return nil, fmt.Errorf("billing: list price books: %w", err)
	}
	books, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PriceBook, error) { return scanPriceBook(row) })
	if err != nil {
		return nil, fmt.Errorf("billing: list price books: %w", err)
	}
	return books, nil
}

// EndPriceBook ends book id at the given time: usage created from then on
// is priced by a less specific scope's book (or none; see
// EffectivePriceBook). Charges already made keep their book until a
// re-rating. Ending a book before it starts, or again, is an error
// wrapping ErrInvalidPriceBook; an unknown id wraps ErrNotFound.
func EndPriceBook(ctx context.Context, db DB, id int64, at time.Time) (PriceBook, error) {
	pb, err := GetPriceBook(ctx, db, id)
	if err != nil {
		return PriceBook{}, err
	}
	if pb.EffectiveTo != nil {
		return PriceBook{}, fmt.Errorf("%w: %s (%s) already ends at %s", ErrInvalidPriceBook, pb.Name(), pb.Scope(), pb.EffectiveTo.Format(time.RFC3339))
	}
	if !at.After(pb.EffectiveAt) {
		return PriceBook{}, fmt.Errorf("%w: %s (%s) starts at %s; it cannot end before that, at %s", ErrInvalidPriceBook,
			pb.Name(), pb.Scope(), pb.EffectiveAt.Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	if _, err := db.Exec(ctx, `UPDATE price_books SET effective_to = $2 WHERE id = $1`, id, at); err != nil {
		return PriceBook{}, fmt.Errorf("billing: end price book %d: %w", id, err)
	}
	return GetPriceBook(ctx, db, id)
}
