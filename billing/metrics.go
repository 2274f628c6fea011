package billing

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the billing service's state to Prometheus: the
// ingester's counts, its backlog in ZL_USAGE, and, read from Postgres at
// each scrape, the usage records not rated yet and billing's River jobs
// waiting.
type Collector struct {
	svc      *Service
	ingested *prometheus.Desc
	unrated  *prometheus.Desc
	backlog  *prometheus.Desc
	queued   *prometheus.Desc
	errors   *prometheus.Desc
	failures atomic.Uint64
}

// NewCollector returns a collector for svc; register it once.
func NewCollector(svc *Service) *Collector {
	return &Collector{
		svc: svc,
		ingested: prometheus.NewDesc("zerolayer_billing_usage_messages_total",
			"Usage messages handled by the ingester, by outcome (stored, duplicate, terminated, retried).", []string{"outcome"}, nil),
		unrated: prometheus.NewDesc("zerolayer_billing_unrated_usage",
			"Usage records stored but not rated yet.", nil, nil),
		backlog: prometheus.NewDesc("zerolayer_billing_usage_backlog",
			"Usage records in ZL_USAGE not stored by billing yet (its consumer's pending and unacknowledged messages).", nil, nil),
		queued: prometheus.NewDesc("zerolayer_billing_river_jobs",
			"Billing's River jobs by state (available, scheduled, retryable, running).", []string{"state"}, nil),
		errors: prometheus.NewDesc("zerolayer_billing_scrape_errors_total",
			"Scrapes whose database (or ZL_USAGE consumer) reads failed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ingested
	ch <- c.unrated
	ch <- c.backlog
	ch <- c.queued
	ch <- c.errors
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Ingester().Stats()
	for outcome, v := range map[string]uint64{"stored": st.Stored, "duplicate": st.Duplicates, "terminated": st.Terminated, "retried": st.Retried} {
		ch <- prometheus.MustNewConstMetric(c.ingested, prometheus.CounterValue, float64(v), outcome)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db := c.svc.cfg.DB
	failed := uint64(0)
	var unrated int64
	if err := db.QueryRow(ctx, `SELECT count(*) FROM usage u LEFT JOIN charges c USING (tenant_id, job_id) WHERE c.job_id IS NULL`).Scan(&unrated); err == nil {
		ch <- prometheus.MustNewConstMetric(c.unrated, prometheus.GaugeValue, float64(unrated))
	} else {
		failed++
	}
	if n, err := c.svc.Ingester().Backlog(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	} else {
		failed++
	}
	counts := map[string]int64{"available": 0, "scheduled": 0, "retryable": 0, "running": 0}
	rows, err := db.Query(ctx, `SELECT state::text, count(*) FROM river_job WHERE queue = ANY($1) AND state IN ('available', 'scheduled', 'retryable', 'running') GROUP BY 1`, []string{Queue, RateQueue})
	if err == nil {
		for rows.Next() {
			var s string
			var n int64
			if rows.Scan(&s, &n) == nil {
				counts[s] = n
			}
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		for s, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(n), s)
		}
	} else {
		failed++
	}
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(c.failures.Add(failed)))
}
