package finance

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// CreatePriceBook stores pb as the next version of its (Tenant, Model)
// scope and returns it with its ID and Version. The tenant is created if
// needed. Charges already made keep the version they were rated with;
// usage created at or after pb.EffectiveAt and rated afterwards uses pb,
// and a re-rating (ledger.RerateArgs) applies it to charges already made. Two
// concurrent creations in one scope can collide on the version; the loser
// gets a unique-violation error and may retry.
func CreatePriceBook(ctx context.Context, db Beginner, pb price.Book) (price.Book, error) {
	if err := pb.Validate(); err != nil {
		return price.Book{}, err
	}
	pb = pb.WithDefaults()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if pb.Tenant != "" {
			if err := ledger.EnsureTenant(ctx, tx, pb.Tenant, ""); err != nil {
				return err
			}
		}
		if err := checkCurrencyChange(ctx, tx, pb); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO price_books (tenant_id, model, version, effective_at, currency, p_in, p_out, p_ttft, p_tool, note,
				p_cached_in, mult_high, mult_normal, mult_low, mult_batch, effective_to, p_embed_in)
			SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16
			FROM price_books
			WHERE tenant_id IS NOT DISTINCT FROM $1 AND model IS NOT DISTINCT FROM $2
			RETURNING id, version, effective_at`,
			nullIfEmpty(pb.Tenant), nullIfEmpty(pb.Model), pb.EffectiveAt, pb.Currency,
			pb.PIn, pb.POut, pb.PTTFT, pb.PTool, pb.Note,
			pb.PCachedIn, pb.MultHigh, pb.MultNormal, pb.MultLow, pb.MultBatch, pb.EffectiveTo, pb.PEmbedIn,
		).Scan(&pb.ID, &pb.Version, &pb.EffectiveAt)
	})
	if err != nil {
		return price.Book{}, fmt.Errorf("billing: create price book: %w", err)
	}
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
func checkCurrencyChange(ctx context.Context, tx pgx.Tx, pb price.Book) error {
	at := pb.EffectiveAt.UTC()
	if at.Equal(ledger.MonthOf(at)) {
		return nil
	}
	books, err := ledger.ListPriceBooks(ctx, tx, ledger.PriceBookFilter{Tenant: pb.Tenant, Model: pb.Model, At: at.Add(-time.Microsecond)})
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
				ledger.MonthOf(at).AddDate(0, 1, 0).Format(time.RFC3339))
		}
	}
	return nil
}

// EndPriceBook ends book id at the given time: usage created from then on
// is priced by a less specific scope's book (or none; see
// ledger.EffectivePriceBook). Charges already made keep their book until a
// re-rating. Ending a book before it starts, or again, is an error
// wrapping price.ErrInvalidBook; an unknown id wraps ledger.ErrNotFound.
func EndPriceBook(ctx context.Context, db DB, id int64, at time.Time) (price.Book, error) {
	pb, err := ledger.GetPriceBook(ctx, db, id)
	if err != nil {
		return price.Book{}, err
	}
	if pb.EffectiveTo != nil {
		return price.Book{}, fmt.Errorf("%w: %s (%s) already ends at %s", price.ErrInvalidBook, pb.Name(), pb.Scope(), pb.EffectiveTo.Format(time.RFC3339))
	}
	if !at.After(pb.EffectiveAt) {
		return price.Book{}, fmt.Errorf("%w: %s (%s) starts at %s; it cannot end before that, at %s", price.ErrInvalidBook,
			pb.Name(), pb.Scope(), pb.EffectiveAt.Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	if _, err := db.Exec(ctx, `UPDATE price_books SET effective_to = $2 WHERE id = $1`, id, at); err != nil {
		return price.Book{}, fmt.Errorf("billing: end price book %d: %w", id, err)
	}
	return ledger.GetPriceBook(ctx, db, id)
}
