// Package billing turns usage records into money. The code lives in two
// rooms with a door between them, over one shared package of prices:
//
//	price    the cost formula and the types both rooms speak: a price
//	         book version (Book), a cost per dimension (Breakdown),
//	         Cost, currencies and their rounding. No database, no River.
//	ledger   the write path that must never lose or double-bill: usage
//	         ingest (ZL_USAGE → Postgres with its River rating job),
//	         usage invariants, rating (the book in force, Cost, value
//	         tags → charges), re-rating, rollups, the billing periods'
//	         locks, the service that runs it all, and the tenants'
//	         limits it publishes with their month-to-date spend.
//	finance  the workflows people run on the ledger: price-book changes,
//	         tenants' billing details, the supplier, credits, closing a
//	         month into invoices and credit notes, reports and their
//	         renderings (table, CSV, JSON, HTML, PDF).
//
// finance imports ledger and price; ledger imports price; price imports
// contracts only. The door is ledger's small exported API that finance
// calls (see ledger's doc.go), and the tables: the ledger alone writes
// usage, charges, charge_history and the rollups; finance alone writes
// price_books, credits, invoices and their lines, the supplier and the
// tenants' billing details, and reads the ledger's tables for its bills.
//
// This package keeps the few names that code outside billing used
// before the split (the service, a charge, a report); new code imports
// the rooms.
//
// Example: run the billing service.
//
//	svc, err := ledger.NewService(ledger.Config{DB: pool, JetStream: js})
//	if err != nil {
//		return err
//	}
//	if err := svc.Start(ctx); err != nil {
//		return err
//	}
//	defer svc.Stop(context.WithoutCancel(ctx))
//
// Nothing under billing imports the worker or anything that runs a model
// (producer's TestNoModelRunner checks billing and what it imports).
package billing
