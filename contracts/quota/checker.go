package quota

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// The limits a refusal names, as the "limit" label of the metrics.
const (
	LimitRequests    = "requests_per_minute"
	LimitTokens      = "tokens_per_minute"
	LimitConcurrency = "max_concurrent"
	LimitSpend       = "monthly_spend"
)

// Config configures a Checker.
type Config struct {
	// Domain names the admitter in the metrics' domain label ("gateway",
	// "worker"). Defaults to "admitter".
	Domain string
	// ReleaseOnResults releases a job when its result appears on
	// ZL_RESULTS, for an admitter that does not see jobs end (the
	// gateway). A worker releases the jobs it ran itself. Defaults to
	// false.
	ReleaseOnResults bool
	// Retention is how far back (in submit time, from now) the rate
	// windows are kept, so that a worker draining an old backlog still
	// judges each job by the window around its submission. Defaults to 24
	// hours (the contract's job TTL).
	Retention time.Duration
	// MaxHold is how long a job admitted and never released counts as in
	// flight (its result was lost, or it expired in the queue). Defaults
	// to 24 hours.
	MaxHold time.Duration
	// Settle is how long a released job's estimated cost still counts
	// towards the spend limit, until billing's month_to_date includes
	// it. Defaults to 30 seconds.
	Settle time.Duration
	// ConcurrencyRetryAfter is the retry-after of concurrency_limited.
	// Defaults to 1 second.
	ConcurrencyRetryAfter time.Duration
	// SpendRetryAfter is the retry-after of spend_limit_exceeded when
	// jobs in flight, not charges, pass the limit (charges alone send the
	// tenant to the next month). Defaults to 10 seconds.
	SpendRetryAfter time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives the checker's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Domain == "" {
		c.Domain = "admitter"
	}
	if c.Retention == 0 {
		c.Retention = 24 * time.Hour
	}
	if c.MaxHold == 0 {
		c.MaxHold = 24 * time.Hour
	}
	if c.Settle == 0 {
		c.Settle = 30 * time.Second
	}
	if c.ConcurrencyRetryAfter == 0 {
		c.ConcurrencyRetryAfter = time.Second
	}
	if c.SpendRetryAfter == 0 {
		c.SpendRetryAfter = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.Retention < window*time.Second || c.MaxHold < 0 || c.Settle < 0 || c.ConcurrencyRetryAfter < 0 || c.SpendRetryAfter < 0 {
		return fmt.Errorf("quota: Retention %v must be at least a minute, and MaxHold, Settle and the retry-afters not negative", c.Retention)
	}
	return nil
}

// Checker admits jobs under the tenants' limits. It is safe for
// concurrent use; Admit and Release take one mutex for a few
// microseconds.
//
// Lifecycle: New, then Start (load and follow ZL_LIMITS), Stop. A Checker
// that is not started admits what its limits (Set) allow; with none, all.
type Checker struct {
	cfg     Config
	nc      *nats.Conn
	metrics *metrics

	mu      sync.Mutex
	tenants map[string]*tenant
	updated time.Time // the newest UpdatedAt applied

	life    sync.Mutex
	started bool
	stopped bool
	quit    chan struct{}
	done    chan struct{}
	sub     *nats.Subscription
}

// tenant is one tenant's limits and counters.
type tenant struct {
	rpm, tpm, conc *int64
	spend          *decimal.Decimal
	month          string
	monthToDate    decimal.Decimal
	priceIn        decimal.Decimal
	priceOut       decimal.Decimal
	priceEmbedIn   decimal.Decimal

	slots    slots
	jobs     map[string]*entry
	inflight int64
	pending  decimal.Decimal // estimated cost of the entries
	swept    int64           // unix second of the last sweep
}

// entry is one admitted job: in flight until released, then settling.
type entry struct {
	sec      int64 // submit second, its slot
	toks     int64
	cost     decimal.Decimal
	admitted time.Time
	released time.Time // zero while in flight
}

// New returns a checker reading limits over nc (nil for one fed only by
// Set, in tests and benchmarks).
func New(nc *nats.Conn, cfg Config) (*Checker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Checker{cfg: cfg, nc: nc, metrics: newMetrics(cfg.Domain), tenants: map[string]*tenant{}}, nil
}

func (t *tenant) limited() bool {
	return t.rpm != nil || t.tpm != nil || t.conc != nil || t.spend != nil
}

// Set applies a tenant's limits, as read from ZL_LIMITS. Its counters
// carry on.
func (c *Checker) Set(l contracts.TenantLimits) {
	dec := func(s string) decimal.Decimal {
		d, err := decimal.NewFromString(s)
		if err != nil {
			return decimal.Zero
		}
		return d
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tenant(l.Tenant)
	t.rpm, t.tpm, t.conc = l.RequestsPerMinute, l.TokensPerMinute, l.MaxConcurrent
	t.spend = nil
	if l.MonthlySpend != nil {
		d := dec(*l.MonthlySpend)
		t.spend = &d
	}
	t.month, t.monthToDate = l.Month, dec(l.MonthToDate)
	t.priceIn, t.priceOut, t.priceEmbedIn = dec(l.PriceIn), dec(l.PriceOut), dec(l.PriceIn)
	if l.PriceEmbedIn != "" {
		t.priceEmbedIn = dec(l.PriceEmbedIn)
	}
	if l.UpdatedAt.After(c.updated) {
		c.updated = l.UpdatedAt
	}
}

// Clear removes a tenant's limits (its key was deleted): it is admitted
// freely from now on.
func (c *Checker) Clear(tenantID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tenants[tenantID]; t != nil {
		t.rpm, t.tpm, t.conc, t.spend = nil, nil, nil, nil
	}
}

// Limited reports whether tenantID has any limit in force here.
func (c *Checker) Limited(tenantID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tenants[tenantID]
	return t != nil && t.limited()
}

// tenant returns the state of id, made on first use. c.mu is held.
func (c *Checker) tenant(id string) *tenant {
	t := c.tenants[id]
	if t == nil {
		t = &tenant{jobs: map[string]*entry{}}
		c.tenants[id] = t
	}
	return t
}

// Admit decides whether tenantID may have job jobID, submitted at
// (the request's time at a gateway, JetStream's stored time at a worker;
// zero means now), with promptTokens and maxTokens. It returns nil and
// counts the job, or a *contracts.Error (rate_limited,
// concurrency_limited, spend_limit_exceeded) with RetryAfterMs, counting
// nothing. A job already counted and not yet forgotten is admitted again
// without counting twice.
func (c *Checker) Admit(tenantID, jobID string, at time.Time, promptTokens, maxTokens int) error {
	now := c.cfg.Now()
	if at.IsZero() {
		at = now
	}
	c.mu.Lock()
	t := c.tenants[tenantID]
	if t == nil || !t.limited() {
		c.mu.Unlock()
		return nil
	}
	c.sweep(t, now)
	if e := t.jobs[jobID]; e != nil {
		if !e.released.IsZero() { // run again (a redelivery): in flight again
			e.released = time.Time{}
			t.inflight++
		}
		c.mu.Unlock()
		return nil
	}
	sec, toks := at.Unix(), int64(promptTokens)+int64(maxTokens)
	var cost decimal.Decimal
	switch {
	case t.spend != nil && maxTokens == 0:
		// No output: an embedding job (a generation always has
		// max_tokens once its defaults are applied), priced at the
		// embedding rate.
		cost = t.priceEmbedIn.Mul(decimal.NewFromInt(int64(promptTokens)))
	case t.spend != nil:
		cost = t.priceIn.Mul(decimal.NewFromInt(int64(promptTokens))).Add(t.priceOut.Mul(decimal.NewFromInt(int64(maxTokens))))
	}
	limit, e := c.check(t, tenantID, now, at, sec, toks, cost)
	if e != nil {
		c.mu.Unlock()
		c.metrics.refused.WithLabelValues(tenantID, string(e.Code), limit).Inc()
		return e
	}
	t.slots.add(sec, 1, toks)
	t.jobs[jobID] = &entry{sec: sec, toks: toks, cost: cost, admitted: now}
	t.inflight++
	t.pending = t.pending.Add(cost)
	c.mu.Unlock()
	c.metrics.admitted.WithLabelValues(tenantID).Inc()
	return nil
}

// check returns the limit a job would pass and its error, or nil. c.mu
// is held.
func (c *Checker) check(t *tenant, id string, now, at time.Time, sec, toks int64, cost decimal.Decimal) (string, *contracts.Error) {
	refuse := func(code contracts.Code, after time.Duration, format string, a ...any) *contracts.Error {
		e := contracts.NewError(code, "tenant %s: "+format, append([]any{id}, a...)...)
		e.RetryAfterMs = max(after.Milliseconds(), 0)
		if after > 0 && e.RetryAfterMs == 0 {
			e.RetryAfterMs = 1
		}
		return e
	}
	// untilFree is the wait until need units leave the window ending at
	// the job's submit time, or a whole window when they never will.
	untilFree := func(need int64, byTokens bool) time.Duration {
		if free, ok := t.slots.freeAt(sec, need, byTokens); ok {
			return time.Unix(free, 0).Sub(at)
		}
		return window * time.Second
	}
	if t.rpm != nil || t.tpm != nil {
		reqs, used := t.slots.peak(sec)
		if t.rpm != nil && reqs+1 > *t.rpm {
			return LimitRequests, refuse(contracts.CodeRateLimited, untilFree(reqs+1-*t.rpm, false),
				"over the limit of %d requests per minute (%d admitted in the last minute)", *t.rpm, reqs)
		}
		if t.tpm != nil && used+toks > *t.tpm {
			if toks > *t.tpm {
				return LimitTokens, refuse(contracts.CodeRateLimited, 0,
					"the job's %d tokens (prompt + max_tokens) are above the limit of %d tokens per minute; lower max_tokens", toks, *t.tpm)
			}
			return LimitTokens, refuse(contracts.CodeRateLimited, untilFree(used+toks-*t.tpm, true),
				"over the limit of %d tokens per minute (%d admitted in the last minute, the job needs %d: prompt + max_tokens)", *t.tpm, used, toks)
		}
	}
	if t.conc != nil && t.inflight+1 > *t.conc {
		return LimitConcurrency, refuse(contracts.CodeConcurrencyLimited, c.cfg.ConcurrencyRetryAfter,
			"%d jobs in flight, the limit is %d", t.inflight, *t.conc)
	}
	if t.spend != nil {
		mtd := t.monthToDate
		if t.month < now.UTC().Format("2006-01") {
			mtd = decimal.Zero // billing has not published the new month yet
		}
		if mtd.Add(t.pending).Add(cost).GreaterThan(*t.spend) {
			after := c.cfg.SpendRetryAfter
			if mtd.Add(cost).GreaterThan(*t.spend) {
				y, m, _ := now.UTC().Date()
				after = time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC).Sub(now)
			}
			return LimitSpend, refuse(contracts.CodeSpendLimitExceeded, after,
				"month-to-date charges %s + %s estimated for jobs in flight + %s for this job would pass the monthly spend limit of %s",
				mtd.String(), t.pending.String(), cost.String(), t.spend.String())
		}
	}
	return "", nil
}

// Release ends job jobID's time in flight (it finished, failed or was
// canceled): it stops counting towards max_concurrent at once, and its
// estimated cost after Config.Settle (until then, admitting the same id
// again does not count it twice). Releasing a job not admitted, or
// twice, does nothing.
func (c *Checker) Release(tenantID, jobID string) {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tenants[tenantID]
	if t == nil {
		return
	}
	if e := t.jobs[jobID]; e != nil && e.released.IsZero() {
		if e.cost.IsZero() {
			// Nothing to settle: forget it now (its rate second stays).
			c.drop(t, jobID, e)
			return
		}
		e.released = now
		t.inflight--
	}
}

// Forget takes back job jobID's admission entirely (it was not submitted
// after all: the publish failed).
func (c *Checker) Forget(tenantID, jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tenants[tenantID]
	if t == nil {
		return
	}
	if e := t.jobs[jobID]; e != nil {
		t.slots.add(e.sec, -1, -e.toks)
		c.drop(t, jobID, e)
	}
}

// drop removes an entry. c.mu is held.
func (c *Checker) drop(t *tenant, jobID string, e *entry) {
	if e.released.IsZero() {
		t.inflight--
	}
	t.pending = t.pending.Sub(e.cost)
	delete(t.jobs, jobID)
}

// sweep, at most once a second per tenant, drops settled and expired
// entries and rate seconds older than Retention. c.mu is held.
func (c *Checker) sweep(t *tenant, now time.Time) {
	if now.Unix() == t.swept {
		return
	}
	t.swept = now.Unix()
	for id, e := range t.jobs {
		if !e.released.IsZero() && now.Sub(e.released) >= c.cfg.Settle || e.released.IsZero() && now.Sub(e.admitted) >= c.cfg.MaxHold {
			c.drop(t, id, e)
		}
	}
	t.slots.trim(now.Add(-c.cfg.Retention).Unix())
}
