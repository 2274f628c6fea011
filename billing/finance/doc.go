// Package finance is what a finance team runs on the ledger: it changes
// prices, keeps the tenants' billing details and the supplier's, adds
// credits and adjustments, closes months into invoices and credit notes,
// and reports, per tenant and over every tenant, in every format.
//
//	CreatePriceBook / EndPriceBook: a new version of a tenant's (or the
//	    default) prices, a currency change only at a month's start; the
//	    ledger prices later usage with it, and a re-rating
//	    (ledger.RerateRangeArgs) the usage already charged
//	SetTenantBilling, SetSupplier: who is billed, at which tax rate and
//	    rule, and who bills; every document keeps a copy as at issue
//	AddCredit: a credit or adjustment of an open month
//	CloseInvoice: a tenant's month → one document per currency in
//	    invoices + invoice_lines (per model, priority, batch, price book
//	    and dimension, embedding input tokens on lines of their own;
//	    credits and adjustments), each line quantity × unit
//	    price rounded at the minor unit, tax by the tenant's rule (per
//	    invoice or per line), the supplier's and the customer's details; a
//	    negative month is a credit note (its own number series) whose
//	    amount goes to tenant_balance and off the next invoices; the month
//	    is locked from then on (ledger.LockPeriodToClose)
//	BuildReport, BuildPeriodReport, BuildBatchReport ◀── charges + usage:
//	    totals, cost per dimension, by model, kind (generation or
//	    embedding: the embedding tokens and cost apart), priority, bucket,
//	    tag, book and day; table, CSV, JSON or HTML
//	BuildOperatorMonth, BuildOperatorReport ◀── every tenant: the month's
//	    documents (drafts while open) adding up to the invoices; revenue
//	    against resource cost
//	Invoice.Write: table, CSV, JSON, HTML, PDF; customer documents (HTML,
//	    PDF) print no internal text (price books, value tags, who added a
//	    credit, notes)
//
// # The door to the ledger
//
// Finance imports ledger and price; the ledger never imports finance.
// It calls the ledger for the price book in force (ledger.
// EffectivePriceBook, GetPriceBook, ListPriceBooks), tenants (EnsureTenant,
// CheckTenant), billing periods and their locks (ParsePeriod, ClosedBy,
// LockPeriodToClose, LockOpenPeriod) and the rollups (DailyTotals,
// BatchTotals), and asks it to re-rate (ledger.RerateRangeArgs). It reads
// the ledger's tables (usage, charges) for its bills and reports but
// never writes them; the ledger reads finance's invoices only to know
// which months are closed. Errors of the ledger come back as they are:
// ledger.ErrNotFound, ledger.ErrUnknownTenant, ledger.ErrInvalidPeriod,
// ledger.ErrPeriodLocked.
//
// Example: close a tenant's month and write its invoice as PDF.
//
//	invs, err := finance.CloseInvoice(ctx, pool, finance.CloseRequest{Tenant: "acme", Period: "2026-11", By: "finance-ops"})
//	if err != nil {
//		return err
//	}
//	return invs[0].Write(w, finance.FormatPDF)
//
// Amounts are exact (shopspring/decimal, Postgres numeric) until a
// document rounds them, half to even at the currency's minor unit
// (price.RoundInvoice).
package finance
