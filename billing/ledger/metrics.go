package ledger

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultStatementTimeout bounds the database reads of one scrape, on the
// server (statement_timeout) and on the client.
const DefaultStatementTimeout = 2 * time.Second

// Collector exports the billing service's state to Prometheus: the
// ingester's counts, its backlog in ZL_USAGE, and, read from Postgres at
// each scrape, the usage records whose rating has not finished and
// billing's River jobs by state. The database reads are cheap whatever the
// size of the ledger: they count River's unfinished jobs through its
// (state, queue, …) index, never the usage and charges tables, and run
// under a statement timeout. When they fail (Postgres down, the timeout
// reached) the collector still answers: zerolayer_billing_db_up is 0, the
// scrape errors count one more, the ingester's counts and backlog (read
// from NATS) are exported as usual, and the database series are left out
// rather than reported stale.
type Collector struct {
	svc      *Service
	db       *pgxpool.Pool
	timeout  time.Duration
	ingested *prometheus.Desc
	unrated  *prometheus.Desc
	backlog  *prometheus.Desc
	queued   *prometheus.Desc
	dbUp     *prometheus.Desc
	errors   *prometheus.Desc
	failures atomic.Uint64
}

// NewCollector returns a collector for svc; register it once. svc may be
// nil for describing only.
func NewCollector(svc *Service) *Collector {
	c := &Collector{
		svc:     svc,
		timeout: DefaultStatementTimeout,
		ingested: prometheus.NewDesc("zerolayer_billing_usage_messages_total",
			"Usage messages handled by the ingester, by outcome (stored, duplicate, terminated, retried).", []string{"outcome"}, nil),
		unrated: prometheus.NewDesc("zerolayer_billing_unrated_usage",
			"Usage records stored whose rating has not finished yet: the records named by billing's rating jobs waiting or running in River.", nil, nil),
		backlog: prometheus.NewDesc("zerolayer_billing_usage_backlog",
			"Usage records in ZL_USAGE not stored by billing yet (its consumer's pending and unacknowledged messages).", nil, nil),
		queued: prometheus.NewDesc("zerolayer_billing_river_jobs",
			"Billing's River jobs by state (available, pending, scheduled, retryable, running, discarded).", []string{"state"}, nil),
		dbUp: prometheus.NewDesc("zerolayer_billing_db_up",
			"1 when this scrape's reads of the billing database succeeded within the statement timeout, else 0.", nil, nil),
		errors: prometheus.NewDesc("zerolayer_billing_scrape_errors_total",
			"Scrapes whose database (or ZL_USAGE consumer) reads failed.", nil, nil),
	}
	if svc != nil {
		c.db = svc.cfg.DB
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ingested
	ch <- c.unrated
	ch <- c.backlog
	ch <- c.queued
	ch <- c.dbUp
	ch <- c.errors
}

// riverStates are the River job states exported; discarded jobs (kept by
// River for a while) are rating that gave up: their records stay unrated.
var riverStates = []string{"available", "pending", "scheduled", "retryable", "running", "discarded"}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Ingester().Stats()
	for outcome, v := range map[string]uint64{"stored": st.Stored, "duplicate": st.Duplicates, "terminated": st.Terminated, "retried": st.Retried} {
		ch <- prometheus.MustNewConstMetric(c.ingested, prometheus.CounterValue, float64(v), outcome)
	}
	failed := uint64(0)
	bctx, bcancel := context.WithTimeout(context.Background(), c.timeout)
	n, err := c.svc.Ingester().Backlog(bctx)
	bcancel()
	if err == nil {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	} else {
		failed++
	}
	up := 0.0
	if counts, unrated, err := c.readDB(); err == nil {
		up = 1
		ch <- prometheus.MustNewConstMetric(c.unrated, prometheus.GaugeValue, float64(unrated))
		for _, s := range riverStates {
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(counts[s]), s)
		}
	} else {
		failed++
	}
	ch <- prometheus.MustNewConstMetric(c.dbUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(c.failures.Add(failed)))
}

// readDB counts billing's River jobs by state and the usage records named
// by the rating jobs not finished yet (a RateArgs job names one, a
// RateBatchArgs job the records in its args), in one read-only
// transaction under the statement timeout. River's index on (state,
// queue, …) keeps the count to the unfinished and discarded jobs, however
// many completed jobs and rated records there are.
func (c *Collector) readDB() (map[string]int64, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts := map[string]int64{}
	var unrated int64
	err := pgx.BeginTxFunc(ctx, c.db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)", strconv.FormatInt(c.timeout.Milliseconds(), 10)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT state::text, count(*),
			coalesce(sum(CASE kind WHEN $2 THEN 1 WHEN $3 THEN jsonb_array_length(args->'jobs') ELSE 0 END), 0)
			FROM river_job WHERE queue = ANY($1) AND state = ANY($4::river_job_state[]) GROUP BY 1`,
			[]string{Queue, RateQueue}, RateArgs{}.Kind(), RateBatchArgs{}.Kind(), riverStates)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var jobs, records int64
			if err := rows.Scan(&s, &jobs, &records); err != nil {
				return err
			}
			counts[s] = jobs
			if s != "discarded" {
				unrated += records
			}
		}
		return rows.Err()
	})
	return counts, unrated, err
}
