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
	err := row.Scan(&pb.ID, &pb.Tenant, &pb.Model, &pb.Version, &pb.EffectiveAt, &pb.Currency, &pb.PIn, &pb.POut, &pb.PTTFT, &pb.PTool, &pb.Note)
	pb.EffectiveAt = pb.EffectiveAt.UTC()
	return pb, err
}

// EffectivePriceBook returns the price book that prices usage of tenant's
// model created at the given time. It looks in the most specific scope
// first: the tenant's book for the model, then the tenant's book for any
// model, then the default book for the model, then the default book for
// any model. In the first scope that has a book effective at or before at,
// it takes the latest effective one (the highest version on a tie). It
// returns ErrNoPriceBook when no scope has one.
func EffectivePriceBook(ctx context.Context, db DB, tenant, model string, at time.Time) (PriceBook, error) {
	pb, err := scanPriceBook(db.QueryRow(ctx, `
		SELECT `+priceBookColumns+`
		FROM price_books
		WHERE (tenant_id = $1 OR tenant_id IS NULL)
		  AND (model = $2 OR model IS NULL)
		  AND effective_at <= $3
		ORDER BY tenant_id IS NULL, model IS NULL, effective_at DESC, version DESC
		LIMIT 1`, tenant, model, at))
	if errors.Is(err, pgx.ErrNoRows) {
		return PriceBook{}, fmt.Errorf("%w: tenant %s, model %s, at %s", ErrNoPriceBook, tenant, model, at.UTC().Format(time.RFC3339Nano))
	}
	if err != nil {
		return PriceBook{}, fmt.Errorf("billing: look up price book: %w", err)
	}
	return pb, nil
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
