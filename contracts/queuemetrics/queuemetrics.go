// Package queuemetrics exports the depth of zerolayer's JetStream streams
// and consumers to Prometheus: the numbers JetStream reports in its stream
// and consumer info, which are also what an autoscaler such as KEDA's
// nats-jetstream scaler reads (a consumer's pending plus ack-pending
// messages). The workers export ZL_JOBS and ZL_DLQ, billing ZL_USAGE; the
// NATS monitoring port is not scraped (it answers JSON, not the Prometheus
// format).
package queuemetrics

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
)

// DefaultTimeout bounds the JetStream reads of one scrape.
const DefaultTimeout = 3 * time.Second

// Collector reads, at each scrape, the info of its streams and of every
// consumer on them. Consumers are reported by group (Group): the
// class-and-tenant consumers of ZL_JOBS (jobs-<priority>-<bucket>-<tenant>)
// add up under their class (jobs-<priority>-<bucket>), so that the series
// do not grow with the tenants.
type Collector struct {
	js      jetstream.JetStream
	streams []string
	timeout time.Duration

	messages    *prometheus.Desc
	pending     *prometheus.Desc
	ackPending  *prometheus.Desc
	redelivered *prometheus.Desc
	consumers   *prometheus.Desc
	up          *prometheus.Desc
	unserved    *prometheus.Desc

	fleet *fleet.Watch // WithFleet
}

// NewCollector returns a collector of streams read through js; register it
// once. js may be nil for describing only.
func NewCollector(js jetstream.JetStream, streams ...string) *Collector {
	sc := []string{"stream", "consumer"}
	return &Collector{
		js: js, streams: streams, timeout: DefaultTimeout,
		messages: prometheus.NewDesc("zerolayer_queue_messages",
			"Messages stored in a stream: for ZL_JOBS (a work queue) the jobs queued or running, for ZL_DLQ the dead letters kept.", []string{"stream"}, nil),
		pending: prometheus.NewDesc("zerolayer_queue_pending",
			"Messages a consumer (group) has not delivered yet (JetStream num_pending).", sc, nil),
		ackPending: prometheus.NewDesc("zerolayer_queue_ack_pending",
			"Messages a consumer (group) delivered and that are not acknowledged yet (JetStream num_ack_pending).", sc, nil),
		redelivered: prometheus.NewDesc("zerolayer_queue_redelivered",
			"Messages a consumer (group) delivered more than once and that are not acknowledged yet (JetStream num_redelivered).", sc, nil),
		consumers: prometheus.NewDesc("zerolayer_queue_consumers",
			"Consumers in a consumer group (a ZL_JOBS class counts its class-and-tenant consumers).", sc, nil),
		unserved: prometheus.NewDesc("zerolayer_jobs_waiting_unserved",
			"Jobs queued in ZL_JOBS for a model no live worker serves (ZL_WORKERS), by model token (contracts.ModelToken: the name, for names of letters, digits and '-'; at most "+strconv.Itoa(maxUnservedModels)+" models, the rest under \"_other\"). They wait for a worker of their model; exported where the collector follows the fleet (WithFleet).", []string{"model"}, nil),
		up: prometheus.NewDesc("zerolayer_queue_up",
			"1 when this scrape read every stream's and consumer's info from JetStream within the timeout, else 0 (the other queue series are then missing or partial).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.messages, c.pending, c.ackPending, c.redelivered, c.consumers, c.up, c.unserved} {
		ch <- d
	}
}

// group is one consumer group's sums.
type group struct {
	pending, ackPending, redelivered, consumers float64
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 1.0
	for _, name := range c.streams {
		if err := c.collectStream(ctx, ch, name); err != nil {
			up = 0
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// collectStream reports one stream and its consumers; a stream that does
// not exist (not provisioned yet) reports nothing and is no error.
func (c *Collector) collectStream(ctx context.Context, ch chan<- prometheus.Metric, name string) error {
	if c.js == nil {
		return errors.New("queuemetrics: no JetStream")
	}
	s, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(s.CachedInfo().State.Msgs), name)
	groups := map[string]*group{}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		key := Group(ci.Name)
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
		}
		g.pending += float64(ci.NumPending)
		g.ackPending += float64(ci.NumAckPending)
		g.redelivered += float64(ci.NumRedelivered)
		g.consumers++
	}
	if err := l.Err(); err != nil {
		return err
	}
	for key, g := range groups {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, g.pending, name, key)
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, g.ackPending, name, key)
		ch <- prometheus.MustNewConstMetric(c.redelivered, prometheus.GaugeValue, g.redelivered, name, key)
		ch <- prometheus.MustNewConstMetric(c.consumers, prometheus.GaugeValue, g.consumers, name, key)
	}
	if name == contracts.StreamJobs && c.fleet != nil {
		return c.collectUnserved(ctx, ch, s)
	}
	return nil
}

// maxUnservedModels bounds the series of zerolayer_jobs_waiting_unserved:
// model names are the tenants' words.
const maxUnservedModels = 32

// WithFleet makes the collector report, from ZL_JOBS, the jobs waiting for
// a model no live worker of w serves (zerolayer_jobs_waiting_unserved),
// and returns c. The caller starts and stops w. Counting them reads the
// subjects of the queued jobs at each scrape.
func (c *Collector) WithFleet(w *fleet.Watch) *Collector {
	c.fleet = w
	return c
}

// UnservedWaiting counts the jobs s (ZL_JOBS) holds for each model no live
// worker of w serves, by model token: the jobs of the current subject form
// (those of the model-less forms are served by any worker).
func UnservedWaiting(ctx context.Context, s jetstream.Stream, w *fleet.Watch) (map[string]uint64, error) {
	served := map[string]bool{}
	for _, m := range w.Served() {
		served[contracts.ModelToken(m)] = true
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.SubjectJobsAll))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for subject, n := range info.State.Subjects {
		r, err := contracts.ParseJobSubject(subject)
		if err != nil || r.Model == "" || served[r.Model] {
			continue
		}
		out[r.Model] += n
	}
	return out, nil
}

// collectUnserved reports zerolayer_jobs_waiting_unserved: 0 for the
// models with no job waiting unserved is not reported (a series per model
// ever asked for would stay), so an alert reads its absence as none.
func (c *Collector) collectUnserved(ctx context.Context, ch chan<- prometheus.Metric, s jetstream.Stream) error {
	counts, err := UnservedWaiting(ctx, s, c.fleet)
	if err != nil {
		return err
	}
	tokens := make([]string, 0, len(counts))
	for t := range counts {
		tokens = append(tokens, t)
	}
	// The most waited-for models by name; the rest together.
	slices.SortFunc(tokens, func(a, b string) int {
		if counts[a] != counts[b] {
			return cmp.Compare(counts[b], counts[a])
		}
		return strings.Compare(a, b)
	})
	var other uint64
	for i, t := range tokens {
		if i >= maxUnservedModels {
			other += counts[t]
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.unserved, prometheus.GaugeValue, float64(counts[t]), t)
	}
	if other > 0 {
		ch <- prometheus.MustNewConstMetric(c.unserved, prometheus.GaugeValue, float64(other), "_other")
	}
	return nil
}

// Group returns the group a consumer is reported under: the class
// consumer's name for a class-and-tenant consumer of ZL_JOBS
// (contracts.TenantConsumerName), the name itself otherwise.
func Group(consumer string) string {
	for _, p := range contracts.Priorities() {
		for _, b := range contracts.AllBuckets() {
			class := contracts.ConsumerName(p, b)
			if consumer == class || strings.HasPrefix(consumer, class+"-") {
				return class
			}
		}
	}
	return consumer
}
