// Package dbtest gives each test a Postgres schema of its own, migrated
// with zerolayer's and River's migrations, so that tests touching the
// database run against real Postgres, in parallel, without seeing each
// other's rows.
//
// The database is the one TEST_DATABASE_URL names, by default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable. When it
// cannot be reached the test is skipped with the reason, except when the
// environment variable CI is set: there a missing database fails the test,
// so that CI cannot pass by skipping everything.
//
// Example:
//
//	func TestCharges(t *testing.T) {
//		t.Parallel()
//		pool := dbtest.Pool(t)
//		// pool's connections use the test's schema through search_path
//	}
//
// It imports migrations; only tests import it.
package dbtest
