package billing

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zerolayer/zerolayer/contracts"
)

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

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
	case !currencyRE.MatchString(pb.Currency):
		return bad("currency %q is not an ISO 4217 code such as USD", pb.Currency)
	case pb.PIn.IsNegative() || pb.POut.IsNegative() || pb.PTTFT.IsNegative() || pb.PTool.IsNegative():
		return bad("prices must not be negative (p_in %s, p_out %s, p_ttft %s, p_tool %s)", pb.PIn, pb.POut, pb.PTTFT, pb.PTool)
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
		return tx.QueryRow(ctx, `
			INSERT INTO price_books (tenant_id, model, version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note)
			SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, $6, $7, $8, $9
			FROM price_books
			WHERE tenant_id IS NOT DISTINCT FROM $1 AND model IS NOT DISTINCT FROM $2
			RETURNING id, version, effective_at`,
			nullIfEmpty(pb.Tenant), nullIfEmpty(pb.Model), pb.EffectiveAt, pb.Currency,
			pb.PIn, pb.POut, pb.PTTFT, pb.PTool, pb.Note,
		).Scan(&pb.ID, &pb.Version, &pb.EffectiveAt)
	})
	if err != nil {
		return PriceBook{}, fmt.Errorf("billing: create price book: %w", err)
	}
	return pb, nil
}

const priceBookColumns = `id, coalesce(tenant_id, ''), coalesce(model, ''), version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note`

func scanPriceBook(row pgx.Row) (PriceBook, error) {
	var pb PriceBook
	err := row.Scan(pb.dest()...)
	pb.EffectiveAt = pb.EffectiveAt.UTC()
	return pb, err
}

// dest returns where to scan priceBookColumns into.
func (pb *PriceBook) dest() []any {
	return []any{&pb.ID, &pb.Tenant, &pb.Model, &pb.Version, &pb.EffectiveAt, &pb.Currency, &pb.PIn, &pb.POut, &pb.PTTFT, &pb.PTool, &pb.Note}
}

// EffectivePriceBook returns the price book that prices usage of tenant's
// model created at the given time. It looks in the most specific scope
// first: the tenant's book for the model, then the tenant's book for any
// model, then the default book for the model, then the default book for
// any model. In the first scope that has a book effective at or before at,
// it takes the latest effective one (the highest version on a tie). It
// returns ErrNoPriceBook when no scope has one.
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
			FROM price_books
			WHERE (tenant_id = q.tenant OR tenant_id IS NULL)
			  AND (model = q.model OR model IS NULL)
			  AND effective_at <= q.at
			ORDER BY tenant_id IS NULL, model IS NULL, effective_at DESC, version DESC
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
		pb.EffectiveAt = pb.EffectiveAt.UTC()
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
