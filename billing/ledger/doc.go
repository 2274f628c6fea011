// Package ledger is billing's write path: it stores every job's usage
// once, prices it with the price book in force, tags its value, rolls it
// up per tenant, day and batch, and re-rates it on request, so that no
// record is lost or billed twice. Finance (package finance) bills from
// what it writes.
//
// Data flows like this:
//
//	worker ── zl.usage.<tenant> (ZL_USAGE) ──▶ Ingester
//	    one transaction per batch of messages: usage rows (one insert,
//	    unique on tenant and job id; CheckUsageInvariants first) + River
//	    rating jobs (InsertManyTx: a RateArgs per record, or one
//	    RateBatchArgs per batch), then ack each message
//	River ──▶ rate: the records of the rating jobs running at once, in
//	      one transaction: price book in force at created_at
//	      (EffectivePriceBook), price.Cost, Tags → charges (one insert,
//	      unique on tenant and job id), each in its billing period: the
//	      usage's month, or the next open one when that month was
//	      invoiced before the rating (under the period's lock)
//	      ──▶ rollup: per tenant and UTC day → usage_daily, per batch →
//	          usage_batches
//	      ──▶ rerate (on request): one job (RerateArgs) or a tenant's
//	          range or billing month (RerateRangeArgs, 1,000 records a
//	          transaction; DryRerate says what it would do): a new price
//	          book version → charges, the previous charge kept in
//	          charge_history; an invoiced period is refused
//	tenant_limits + charges ──▶ LimitsPublisher ── every 5 s and on
//	    SetTenantLimits (NOTIFY) ──▶ ZL_LIMITS (contracts.TenantLimits:
//	    limits, month-to-date spend, price estimate), which the gateway and
//	    the workers enforce (contracts/quota)
//
// Service runs the Ingester, the River client (NewRiver) and the
// LimitsPublisher; Collector exports their state to Prometheus.
//
// A record's kind is stored with it (usage.kind: generation, or
// embedding for an embedding job), and the formula prices an embedding
// job's input tokens at the book's embedding rate in a dimension of its
// own (price.Breakdown.EmbeddingInput, charges.cost_embedding_input), the
// same at a re-rating, which prices the stored body again; the value-tag
// metric embedding_input_tokens, 0 for a generation, gives embedding jobs
// the default tag embedding and lets a tenant's rules single them out.
//
// A usage record is billed once whatever the redeliveries: the usage table
// is unique on (tenant, job id), the rating job is inserted only with a new
// row, and a charge is unique on (tenant, job id) and never overwritten by
// a rating (only a re-rating replaces it), so a rating run twice bills
// nothing twice. Job ids are unique per tenant only, so everything that
// names a job (RateArgs, RerateArgs, GetUsage, GetCharge) names its
// tenant too.
//
// # The door to finance
//
// Finance imports the ledger, never the other way. What it calls:
//
//   - the price book in force and stored books: EffectivePriceBook,
//     GetPriceBook, ListPriceBooks (finance adds and ends versions);
//   - tenants: EnsureTenant, CheckTenant;
//   - periods: ParsePeriod, MonthOf, PeriodName; ClosedBy (the invoice
//     that closed a period); LockPeriodToClose (the exclusive side of a
//     period's lock, which a close holds while it reads the charges and
//     stores its documents) and LockOpenPeriod (the shared side, which a
//     credit holds, as ratings and re-ratings do);
//   - re-rating: RerateArgs, RerateRangeArgs, DryRerate, inserted with a
//     River client from NewRiver;
//   - reads of what the ledger wrote: GetCharge, DailyTotals, BatchTotals
//     (and the charges and usage tables, by SQL, for bills and reports).
//
// The ledger reads one table of finance's, invoices, and only to know
// which periods are closed (a period is closed once it has an invoice).
// It writes usage, charges, charge_history, usage_daily, usage_batches,
// value_tag_rules, tenant_limits and new tenants' rows.
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
// It imports price and contracts of ours (pgx, River, NATS and decimal
// from outside), never finance, the worker or anything that runs a model.
// The tables come from package migrations; tests get a migrated schema of
// their own from migrations/dbtest.
package ledger
