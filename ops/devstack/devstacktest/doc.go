// Package devstacktest starts a dev stack for a test: the whole system of
// ops/devstack in one process, serving the shared TinyStories 260K model
// on one CPU thread, in a database schema of the test's own (from
// migrations/dbtest), logging nothing, and stopped when the test ends.
//
//	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0"})
//	c, err := producer.New(st.Conn(), producer.Config{Tenant: "acme", Models: st.Models().Paths()})
//
// A test without the shared model or a database is skipped (see dbtest
// for CI). It may import devstack and the test helpers of the packages
// below it; only tests import it.
package devstacktest
