package quota

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Checker's counters and gauge descriptions, each with the
// constant label domain (gateway, worker), so that a process with two
// Checkers (zerolayer dev) registers both. The gauges are read from the
// state at scrape time (Collect): admission pays only for the counters.
type metrics struct {
	refused  *prometheus.CounterVec
	admitted *prometheus.CounterVec
	usage    *prometheus.Desc
	limit    *prometheus.Desc
	updated  *prometheus.Desc
}

func newMetrics(domain string) *metrics {
	dl := prometheus.Labels{"domain": domain}
	return &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_quota_refusals_total", ConstLabels: dl,
			Help: "Jobs refused for a tenant limit, by admitter (domain: gateway, worker), tenant, error code and limit."},
			[]string{"tenant", "code", "limit"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_quota_admitted_total", ConstLabels: dl,
			Help: "Jobs of tenants with limits admitted, by admitter and tenant."}, []string{"tenant"}),
		usage: prometheus.NewDesc("zerolayer_quota_usage",
			"What a tenant with limits uses now at this admitter, by limit: requests and tokens admitted in the last minute, jobs in flight, month-to-date spend plus the estimate of jobs in flight.",
			[]string{"tenant", "limit"}, dl),
		limit: prometheus.NewDesc("zerolayer_quota_limit",
			"A tenant's limit, by limit (absent when unlimited).", []string{"tenant", "limit"}, dl),
		updated: prometheus.NewDesc("zerolayer_quota_limits_updated_timestamp_seconds",
			"When billing computed the newest tenant limits this admitter has (Unix time); stale when billing stops publishing.", nil, dl),
	}
}

// Register registers the checker's metrics with r: refusals and
// admissions (counters), and per tenant with limits its usage and limit
// by limit (gauges).
func (c *Checker) Register(r prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{c.metrics.refused, c.metrics.admitted, (*collector)(c)} {
		if err := r.Register(col); err != nil {
			return err
		}
	}
	return nil
}

// collector reads the gauges from the Checker's state.
type collector Checker

func (x *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- x.metrics.usage
	ch <- x.metrics.limit
	ch <- x.metrics.updated
}

func (x *collector) Collect(ch chan<- prometheus.Metric) {
	c := (*Checker)(x)
	now := c.cfg.Now()
	sec := now.Unix()
	m := c.metrics
	c.mu.Lock()
	defer c.mu.Unlock()
	gauge := func(desc *prometheus.Desc, v float64, id, limit string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, id, limit)
	}
	for id, t := range c.tenants {
		if !t.limited() {
			continue
		}
		reqs, toks := t.slots.sum(sec)
		gauge(m.usage, float64(reqs), id, LimitRequests)
		gauge(m.usage, float64(toks), id, LimitTokens)
		gauge(m.usage, float64(t.inflight), id, LimitConcurrency)
		spent, _ := t.monthToDate.Add(t.pending).Float64()
		gauge(m.usage, spent, id, LimitSpend)
		for _, l := range []struct {
			name string
			v    *int64
		}{{LimitRequests, t.rpm}, {LimitTokens, t.tpm}, {LimitConcurrency, t.conc}} {
			if l.v != nil {
				gauge(m.limit, float64(*l.v), id, l.name)
			}
		}
		if t.spend != nil {
			v, _ := t.spend.Float64()
			gauge(m.limit, v, id, LimitSpend)
		}
	}
	if !c.updated.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.updated, prometheus.GaugeValue, float64(c.updated.UnixNano())/1e9)
	}
}
