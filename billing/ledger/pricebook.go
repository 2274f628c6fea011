package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zerolayer/zerolayer/billing/price"
)

const priceBookColumns = `id, coalesce(tenant_id, ''), coalesce(model, ''), version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note,
	p_cached_in, mult_high, mult_normal, mult_low, mult_batch, effective_to, p_embed_in`

func scanPriceBook(row pgx.Row) (price.Book, error) {
	var pb price.Book
	err := row.Scan(bookDest(&pb)...)
	bookUTC(&pb)
	return pb, err
}

// bookDest returns where to scan priceBookColumns into.
func bookDest(pb *price.Book) []any {
	return []any{&pb.ID, &pb.Tenant, &pb.Model, &pb.Version, &pb.EffectiveAt, &pb.Currency, &pb.PIn, &pb.POut, &pb.PTTFT, &pb.PTool, &pb.Note,
		&pb.PCachedIn, &pb.MultHigh, &pb.MultNormal, &pb.MultLow, &pb.MultBatch, &pb.EffectiveTo, &pb.PEmbedIn}
}

// bookUTC puts pb's times in UTC, as scanned from the database.
func bookUTC(pb *price.Book) {
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
func EffectivePriceBook(ctx context.Context, db DB, tenant, model string, at time.Time) (price.Book, error) {
	books, err := effectivePriceBooks(ctx, db, []bookFor{{tenant, model, at}})
	if err != nil {
		return price.Book{}, err
	}
	if books[0] == nil {
		return price.Book{}, noPriceBook(tenant, model, at)
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
func effectivePriceBooks(ctx context.Context, db DB, qs []bookFor) ([]*price.Book, error) {
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
	out := make([]*price.Book, len(qs))
	for rows.Next() {
		var i int
		pb := new(price.Book)
		if err := rows.Scan(append([]any{&i}, bookDest(pb)...)...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("billing: look up price books: %w", err)
		}
		bookUTC(pb)
		out[i-1] = pb
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("billing: look up price books: %w", err)
	}
	return out, nil
}

// GetPriceBook returns the stored price book id, or an error wrapping
// ErrNotFound.
func GetPriceBook(ctx context.Context, db DB, id int64) (price.Book, error) {
	pb, err := scanPriceBook(db.QueryRow(ctx, `SELECT `+priceBookColumns+` FROM price_books WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return price.Book{}, fmt.Errorf("%w: price book %d", ErrNotFound, id)
	}
	if err != nil {
		return price.Book{}, fmt.Errorf("billing: read price book %d: %w", id, err)
	}
	return pb, nil
}

// appliesTo reports whether pb may price usage of tenant's model.
func appliesTo(pb price.Book, tenant, model string) bool {
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
func ListPriceBooks(ctx context.Context, db DB, f PriceBookFilter) ([]price.Book, error) {
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
	books, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (price.Book, error) { return scanPriceBook(row) })
	if err != nil {
		return nil, fmt.Errorf("billing: list price books: %w", err)
	}
	return books, nil
}
