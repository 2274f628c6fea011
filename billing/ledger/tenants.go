package ledger

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// CheckTenant returns an error wrapping ErrUnknownTenant when tenant is
// not stored. Every usage record, price book and value-tag rule of a
// tenant stores it first, so a tenant that is not stored has none of them.
func CheckTenant(ctx context.Context, db DB, tenant string) error {
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
