package finance

import "github.com/zerolayer/zerolayer/billing/ledger"

// DB is what finance's queries need: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx, as for the ledger's. Functions taking a DB run their statements
// on it as they are, so passing a transaction makes them part of it.
type DB = ledger.DB

// Beginner starts transactions: a *pgxpool.Pool, a *pgx.Conn, or a pgx.Tx
// (which nests with a savepoint).
type Beginner = ledger.Beginner

// nullIfEmpty maps "" (a default book, any model) to SQL NULL.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
