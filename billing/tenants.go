package billing

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// DB is what billing's queries need: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx. Functions taking a DB run their statements on it as they are, so
// passing a transaction makes them part of it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts transactions: a *pgxpool.Pool, a *pgx.Conn, or a pgx.Tx
// (which nests with a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// EnsureTenant stores tenant if it is not stored yet, named name (the id
// when name is empty). An existing tenant keeps its name. The ingester
// stores the tenants of every batch of usage records (ensureTenants), so
// tenants need no registration before their first job.
func EnsureTenant(ctx context.Context, db DB, tenant, name string) error {
	if name == "" {
		name = tenant
	}
	return storeTenants(ctx, db, []string{tenant}, []string{name})
}

// ensureTenants is EnsureTenant for many tenants at once (repeats allowed),
// each named by its id.
func ensureTenants(ctx context.Context, db DB, tenants []string) error {
	ids := slices.Compact(slices.Sorted(slices.Values(tenants)))
	return storeTenants(ctx, db, ids, ids)
}

// storeTenants stores the tenants ids (distinct, in a fixed order so that
// concurrent transactions do not deadlock) with their names, unless stored.
func storeTenants(ctx context.Context, db DB, ids, names []string) error {
	for _, id := range ids {
		if err := contracts.ValidateTenant(id); err != nil {
			return err
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO tenants (id, name) SELECT * FROM unnest($1::text[], $2::text[])
		ON CONFLICT (id) DO NOTHING`, ids, names); err != nil {
		if len(ids) == 1 {
			return fmt.Errorf("billing: store tenant %s: %w", ids[0], err)
		}
		return fmt.Errorf("billing: store %d tenants: %w", len(ids), err)
	}
	return nil
}

// JobRef names a job: job ids are unique per tenant only.
type JobRef struct {
	// Tenant is the job's tenant.
	Tenant string `json:"tenant"`
	// JobID is the job, unique within Tenant only.
	JobID string `json:"job_id"`
}

// checkTenant returns ErrUnknownTenant when tenant is not stored. Every
// usage record, price book and value-tag rule of a tenant stores it first,
// so a tenant that is not stored has none of them.
func checkTenant(ctx context.Context, db DB, tenant string) error {
	var known bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)`, tenant).Scan(&known); err != nil {
		return fmt.Errorf("billing: look up tenant %s: %w", tenant, err)
	}
	if !known {
		return fmt.Errorf("%w %q: no usage recorded, and no price book or value-tag rule of its own", ErrUnknownTenant, tenant)
	}
	return nil
}

// nullIfEmpty maps "" (default book, default rule, any model) to SQL NULL.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

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

// GetTenantBilling returns tenant's billing details (ErrUnknownTenant for
// a tenant not stored). A tenant never given any has its id as name, no
// tax and 30 days' terms.
func GetTenantBilling(ctx context.Context, db DB, tenant string) (TenantBilling, error) {
	if err := checkTenant(ctx, db, tenant); err != nil {
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
	if err := EnsureTenant(ctx, db, b.Tenant, ""); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `UPDATE tenants SET billing_name = $2, billing_address = $3, billing_email = $4, tax_id = $5,
		tax_rate = $6, payment_terms_days = $7, tax_rounding = $8 WHERE id = $1`, b.Tenant, b.Customer.Name, b.Customer.Address, b.Customer.Email,
		b.Customer.TaxID, b.TaxRate, b.PaymentTermsDays, cmp.Or(b.TaxRounding, TaxPerInvoice)); err != nil {
		return fmt.Errorf("billing: store the billing details of %s: %w", b.Tenant, err)
	}
	return nil
}
