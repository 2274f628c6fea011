// Package migrations holds zerolayer's Postgres schema as embedded SQL
// migrations, and applies them together with River's own migrations.
//
// Each migration is a pair of files, NNNN_name.up.sql and
// NNNN_name.down.sql, embedded in the binary. Up applies River's pending
// migrations (River keeps its jobs in the same schema, so that billing can
// insert a job in the transaction that stores a usage record), then each
// pending zerolayer migration in a transaction of its own, recording it in
// the zl_schema_migrations table. Down reverts the newest migrations;
// Status reports what is applied. Everything happens in the schema the
// connection's search_path selects, which is how migrations/dbtest gives
// each test a schema of its own.
//
// The tables: tenants; price_books (versioned, per tenant and model, with
// a default book seeded from DESIGN.md); usage (one row per job, unique on
// the tenant and job id: job ids are unique per tenant only); charges and
// charge_history (the priced usage, keyed like usage, re-rated
// charges keep their predecessors); value_tag_rules (defaults seeded); and
// usage_daily (per tenant and day totals). See README.md.
//
// Example:
//
//	pool, err := pgxpool.New(ctx, databaseURL)
//	if err != nil {
//		return err
//	}
//	defer pool.Close()
//	changes, err := migrations.Up(ctx, pool)
//	for _, c := range changes {
//		fmt.Printf("applied %s %d %s\n", c.Line, c.Version, c.Name)
//	}
//	return err
//
// It imports nothing of ours (pgx and River's migrator from outside).
package migrations
