// Package billing turns usage records into money: it stores every job's
// usage once, prices it with a versioned price book, tags its value, rolls
// it up per tenant and day, and reports on it.
//
// Data flows like this:
//
//	worker ── zl.usage.<tenant> (ZL_USAGE) ──▶ Ingester
//	    one transaction per batch of messages: usage rows (one insert,
//	    unique on tenant and job id) + River rating jobs (InsertManyTx: a
//	    RateArgs per record, or one RateBatchArgs per batch)
//	    then ack each message
//	River ──▶ rate: the records of the rating jobs running at once, in
//	      one transaction: price book in force at created_at, Cost,
//	      Tags → charges (one insert, unique on tenant and job id)
//	      ──▶ rollup: per tenant and UTC day → usage_daily
//	      ──▶ rerate (on request): one job (RerateArgs) or a tenant's
//	          period (RerateRangeArgs, 1,000 records a transaction): a
//	          new price-book version → charges, the previous charge kept
//	          in charge_history; an invoiced period is refused
//	CloseInvoice: a tenant's month → one document per currency in
//	    invoices + invoice_lines (per model, priority, batch, price book
//	    and dimension; credits and adjustments of AddCredit), each line
//	    quantity × unit price rounded at the minor unit, tax by the
//	    tenant's rule (per invoice or per line), the supplier's and the
//	    customer's details; a negative month is a credit note (its own
//	    number series) whose amount goes to tenant_balance and off the
//	    next invoices; the month is locked from then on, and usage of it
//	    rated later goes to the next open month (placeCharges, under the
//	    period's advisory lock)
//	BuildOperatorMonth ◀── the month's documents (drafts while open):
//	    every tenant, per currency, adding up to the invoices
//	BuildReport ◀── charges + usage: totals, cost per dimension, by model,
//	    priority, bucket and tag; written as a table, CSV or JSON
//	tenant_limits + charges ──▶ LimitsPublisher ── every 5 s and on
//	    SetTenantLimits (NOTIFY) ──▶ ZL_LIMITS (contracts.TenantLimits:
//	    limits, month-to-date spend, price estimate), which the gateway and
//	    the workers enforce (contracts/quota)
//
// The cost of a job is
//
//	m × ( (input_tokens − cached_input_tokens) × p_in
//	      + cached_input_tokens × p_cached_in + output_tokens × p_out
//	      + time_to_first_token_ms × p_ttft + tool_execution_time_ms × p_tool )
//
// with m the book's multiplier for the job's priority (times its batch
// multiplier for a job of a batch; see Cost)
// in shopspring/decimal and Postgres numeric, never floating point, and
// unrounded until an invoice (RoundInvoice: half to even at the currency's
// minor unit). Price books are versioned per tenant and model with an
// effective time (EffectivePriceBook); a charge records the book and
// version it used, so it can be re-rated (RerateArgs). Value tags are rules
// over usage fields, with DESIGN.md's defaults (DefaultTagRules) that a
// tenant may override per tag (value_tag_rules).
//
// A usage record is billed once whatever the redeliveries: the usage table
// is unique on (tenant, job id), the rating job is inserted only with a new
// row, and a charge is unique on (tenant, job id) and never overwritten by
// a rating (only a re-rating replaces it), so a rating run twice bills
// nothing twice. Job ids are unique per
// tenant only, so everything that names a job (RateArgs, RerateArgs,
// GetUsage, GetCharge) names its tenant too; two tenants' jobs of the same
// id are two jobs, each billed to its own tenant.
//
// The tables come from package migrations; tests get a migrated schema of
// their own from migrations/dbtest.
//
// Example: price a record without a database.
//
//	u, err := contracts.DecodeUsage(body)
//	if err != nil {
//		return err
//	}
//	b := billing.Cost(u, billing.DefaultPriceBook())
//	fmt.Println(b.Total, billing.RoundInvoice(b.Total, "USD"))
//
// Example: run the billing service.
//
//	svc, err := billing.NewService(billing.Config{DB: pool, JetStream: js})
//	if err != nil {
//		return err
//	}
//	if err := svc.Start(ctx); err != nil {
//		return err
//	}
//	defer svc.Stop(context.WithoutCancel(ctx))
//
// It imports contracts and nothing else of ours (pgx, River and decimal from
// outside): never the worker or anything that runs a model (producer's
// TestNoModelRunner checks billing too).
package billing
