package finance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Validate reports supplier details that cannot be printed on an
// invoice, wrapping ErrInvalidSupplier: the name and the address are
// required.
func (s Supplier) Validate() error {
	switch {
	case strings.TrimSpace(s.Name) == "":
		return fmt.Errorf("%w: the supplier's legal name is required", ErrInvalidSupplier)
	case strings.TrimSpace(s.Address) == "":
		return fmt.Errorf("%w: the supplier's postal address is required", ErrInvalidSupplier)
	case len(s.Name) > 200 || len(s.Address) > 1000 || len(s.TaxID) > 64 || len(s.Email) > 200 || len(s.PaymentInstructions) > 1000:
		return fmt.Errorf("%w: a detail is too long (name 200, address 1000, tax id 64, email 200, payment instructions 1000 bytes at most)", ErrInvalidSupplier)
	}
	return nil
}

// GetSupplier returns the supplier's details in force: the latest set.
// It returns ErrNoSupplier when none were ever set.
func GetSupplier(ctx context.Context, db DB) (Supplier, error) {
	var s Supplier
	err := db.QueryRow(ctx, `SELECT name, address, tax_id, email, payment_instructions FROM supplier ORDER BY id DESC LIMIT 1`).
		Scan(&s.Name, &s.Address, &s.TaxID, &s.Email, &s.PaymentInstructions)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("%w: set them once with 'zerolayer invoice supplier --name NAME --address ADDRESS [--tax-id ID] [--email E] [--payment-instructions TEXT]'", ErrNoSupplier)
	}
	if err != nil {
		return s, fmt.Errorf("billing: read the supplier: %w", err)
	}
	return s, nil
}

// SetSupplier stores s as the supplier's details from now on, saying who
// set them. Documents already issued keep the details they were issued
// with.
func SetSupplier(ctx context.Context, db DB, s Supplier, by string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `INSERT INTO supplier (name, address, tax_id, email, payment_instructions, created_by)
		VALUES ($1, $2, $3, $4, $5, $6)`, s.Name, s.Address, s.TaxID, s.Email, s.PaymentInstructions, by); err != nil {
		return fmt.Errorf("billing: store the supplier: %w", err)
	}
	return nil
}
