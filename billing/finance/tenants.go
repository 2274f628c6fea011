package finance

import (
	"cmp"
	"context"
	"fmt"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
)

// TenantBilling is what a tenant's invoices print and apply: its billing
// details, tax rate and payment terms.
type TenantBilling struct {
	Tenant   string   `json:"tenant"`
	Customer Customer `json:"customer"`
	// TaxRate is applied to each invoice's subtotal: 0.2 is 20 %, in
	// [0, 1).
	TaxRate decimal.Decimal `json:"tax_rate"`
	// PaymentTermsDays is the days from issue to the due date.
	PaymentTermsDays int `json:"payment_terms_days"`
	// TaxRounding is the tax rule of the tenant's invoices: TaxPerInvoice
	// (the default; "" means it) or TaxPerLine.
	TaxRounding string `json:"tax_rounding"`
}

// Validate reports details that cannot be stored, wrapping
// ErrInvalidCustomer.
func (b TenantBilling) Validate() error {
	if err := contracts.ValidateTenant(b.Tenant); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCustomer, err)
	}
	switch {
	case b.TaxRate.IsNegative() || b.TaxRate.GreaterThanOrEqual(one):
		return fmt.Errorf("%w: tax rate %s is outside [0, 1) (0.2 is 20 %%)", ErrInvalidCustomer, b.TaxRate)
	case b.TaxRounding != "" && b.TaxRounding != TaxPerInvoice && b.TaxRounding != TaxPerLine:
		return fmt.Errorf("%w: tax rounding %q is neither %q nor %q", ErrInvalidCustomer, b.TaxRounding, TaxPerInvoice, TaxPerLine)
	case b.PaymentTermsDays < 0 || b.PaymentTermsDays > 365:
		return fmt.Errorf("%w: payment terms of %d days are outside [0, 365]", ErrInvalidCustomer, b.PaymentTermsDays)
	case len(b.Customer.Name) > 200 || len(b.Customer.Address) > 1000 || len(b.Customer.Email) > 200 || len(b.Customer.TaxID) > 64:
		return fmt.Errorf("%w: a detail is too long (name 200, address 1000, email 200, tax id 64 bytes at most)", ErrInvalidCustomer)
	}
	return nil
}

// GetTenantBilling returns tenant's billing details (ledger.ErrUnknownTenant for
// a tenant not stored). A tenant never given any has its id as name, no
// tax and 30 days' terms.
func GetTenantBilling(ctx context.Context, db DB, tenant string) (TenantBilling, error) {
	if err := ledger.CheckTenant(ctx, db, tenant); err != nil {
		return TenantBilling{}, err
	}
	b := TenantBilling{Tenant: tenant}
	err := db.QueryRow(ctx, `SELECT coalesce(nullif(billing_name, ''), name, id), billing_address, billing_email, tax_id, tax_rate, payment_terms_days, tax_rounding
		FROM tenants WHERE id = $1`, tenant).Scan(&b.Customer.Name, &b.Customer.Address, &b.Customer.Email, &b.Customer.TaxID,
		&b.TaxRate, &b.PaymentTermsDays, &b.TaxRounding)
	if err != nil {
		return TenantBilling{}, fmt.Errorf("billing: read the billing details of %s: %w", tenant, err)
	}
	return b, nil
}

// SetTenantBilling stores b (the tenant is created if needed). Invoices
// already issued keep the details they were issued with.
func SetTenantBilling(ctx context.Context, db DB, b TenantBilling) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if err := ledger.EnsureTenant(ctx, db, b.Tenant, ""); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `UPDATE tenants SET billing_name = $2, billing_address = $3, billing_email = $4, tax_id = $5,
		tax_rate = $6, payment_terms_days = $7, tax_rounding = $8 WHERE id = $1`, b.Tenant, b.Customer.Name, b.Customer.Address, b.Customer.Email,
		b.Customer.TaxID, b.TaxRate, b.PaymentTermsDays, cmp.Or(b.TaxRounding, TaxPerInvoice)); err != nil {
		return fmt.Errorf("billing: store the billing details of %s: %w", b.Tenant, err)
	}
	return nil
}
