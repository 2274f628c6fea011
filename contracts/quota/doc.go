// Package quota is the admission check of per-tenant limits, shared by
// everything that admits jobs: the HTTP gateway (and any Go client given a
// Checker) before it publishes a job, and every worker before it runs one,
// so that a tenant publishing straight to NATS cannot go around the
// gateway.
//
// # Data flow
//
//	Postgres tenant_limits + charges ──▶ billing ── every few seconds and
//	    on set-limits ──▶ ZL_LIMITS (key-value, key = tenant,
//	    contracts.TenantLimits) ──watch──▶ Checker in each gateway/worker
//
// A Checker keeps, per tenant with limits:
//
//   - requests and tokens admitted per second of submit time, summed over
//     the 60 seconds up to a job's submit time (requests_per_minute,
//     tokens_per_minute; a job counts prompt tokens + max_tokens). The
//     gateway passes the time of the request; a worker passes the time
//     JetStream stored the job (its metadata timestamp, which a tenant
//     cannot forge), so jobs drained from a backlog are judged by when
//     they were submitted, not by how fast the worker drains them;
//   - the jobs in flight: admitted and not yet released (max_concurrent).
//     A worker releases a job when it ends; a gateway when the job's
//     result appears on ZL_RESULTS (Config.ReleaseOnResults). A job never
//     released stops counting after Config.MaxHold;
//   - the estimated cost of those jobs (prompt tokens × price_in +
//     max_tokens × price_out, at the prices billing publishes), kept for
//     Config.Settle after release until billing's month_to_date includes
//     the job. The spend check is month_to_date + in flight + this job ≤
//     monthly_spend.
//
// A job over a limit gets a *contracts.Error with code rate_limited,
// concurrency_limited or spend_limit_exceeded and RetryAfterMs set; it is
// not counted. Admitting the same job id twice (a redelivery, a client's
// retry) counts it once.
//
// # Several gateways and workers
//
// Each Checker counts what it admitted itself: N gateways behind a load
// balancer let a tenant through up to N × its rate and concurrency limits
// (and the workers then refuse what is over theirs), and M workers each
// enforce the limits on the jobs they pull. Size limits for that (divide
// by the number of admitters) or run one gateway per tenant group. The
// spend limit is shared: month_to_date comes from billing, only the
// in-flight estimate is per process. A Checker that has not heard from
// billing (no ZL_LIMITS bucket yet) admits everything; one that has keeps
// the last limits it saw when billing stops.
//
// # Example
//
//	q, _ := quota.New(nc, quota.Config{Domain: "gateway", ReleaseOnResults: true})
//	_ = q.Start(ctx) // loads ZL_LIMITS, then follows it
//	defer q.Stop(ctx)
//	if err := q.Admit("acme", jobID, time.Now(), promptTokens, maxTokens); err != nil {
//		e := contracts.ErrorFrom(err) // rate_limited, retry after e.RetryAfter()
//	}
//	defer q.Release("acme", jobID)
//
// It imports contracts and nothing else of ours.
package quota
