package sched

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the scheduler's Prometheus metrics, named after vLLM's
// (zerolayer_ instead of vllm:). Register them with Register.
type Metrics struct {
	running       prometheus.Gauge
	waiting       prometheus.Gauge
	kvUsed        prometheus.Gauge
	kvFree        prometheus.Gauge
	kvCached      prometheus.Gauge
	kvUsage       prometheus.Gauge
	hostUsed      prometheus.Gauge
	prefixQueries prometheus.Counter
	prefixHits    prometheus.Counter
	preemptions   *prometheus.CounterVec
	swappedBytes  prometheus.Counter
	swapIns       prometheus.Counter
	swapGC        prometheus.Counter
	rejections    prometheus.Counter
	interrupted   prometheus.Counter
	reservedWaits prometheus.Counter
	attaches      prometheus.Counter
	duplicated    prometheus.Counter
	drafted       *prometheus.CounterVec
	draftAccepted *prometheus.CounterVec
	// draftedBy and acceptedBy are drafted's and draftAccepted's counter
	// of each source, resolved once: a step counts its drafts without a
	// label lookup.
	draftedBy, acceptedBy [numSources]prometheus.Counter
	stepTokens            prometheus.Histogram
	tenantTokens          *prometheus.CounterVec
	admissions            *prometheus.CounterVec
	waitSteps             [numHeld]prometheus.Counter
	waitVec               *prometheus.CounterVec
	lastHits, lastQ       uint64
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "zerolayer_" + name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_" + name, Help: help})
	}
	m := &Metrics{
		running:       g("num_requests_running", "Sequences in the running batch."),
		waiting:       g("num_requests_waiting", "Sequences admitted to the scheduler but waiting for memory or a slot (preempted ones included)."),
		kvUsed:        g("kv_cache_blocks_used", "KV blocks referenced by sequences."),
		kvFree:        g("kv_cache_blocks_free", "KV blocks free or held only by the prefix cache."),
		kvCached:      g("kv_cache_blocks_cached", "KV blocks in the prefix cache."),
		kvUsage:       g("kv_cache_usage_perc", "Fraction of KV blocks referenced by sequences."),
		hostUsed:      g("kv_host_swap_blocks", "Blocks held in the host swap tier."),
		prefixQueries: c("prefix_cache_queries_total", "Prefix-cache block look-ups."),
		prefixHits:    c("prefix_cache_hits_total", "Prefix-cache block look-ups that hit."),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_num_preemptions_total",
			Help: "Sequences evicted, by mode (swap or recompute)."}, []string{"mode"}),
		swappedBytes:  c("kv_swapped_bytes_total", "Bytes of KV blocks copied to the host tier."),
		swapIns:       c("kv_swap_ins_total", "Sequences resumed from the host tier."),
		swapGC:        c("kv_swap_gc_total", "Swapped sequences whose host copy expired (they recompute)."),
		rejections:    c("admission_rejections_total", "Jobs rejected because they can never fit in KV memory."),
		interrupted:   c("steps_interrupted_total", "Forward steps abandoned mid-way for an arriving high-priority job (run again after it is admitted)."),
		reservedWaits: c("reserved_waits_total", "Steps a reserved (low_latency) job sat out because the KV block it needed is kept for another reserved job to finish (the banker's rule)."),
		attaches:      c("prefix_attaches_total", "Jobs that waited for a running sequence computing their prompt's leading blocks, to share them instead of computing them again."),
		duplicated:    c("prefill_duplicated_tokens_total", "Prompt tokens computed in full blocks that another sequence computed too (in the prefix cache already, or computed beside them)."),
		drafted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_draft_tokens_total",
			Help: "Draft tokens verified in forward passes, by source (context: n-grams of the job's prompt and output)."}, []string{"source"}),
		draftAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_draft_accepted_tokens_total",
			Help: "Draft tokens the model agreed with, emitted without a forward pass of their own, by source; over zerolayer_draft_tokens_total, the acceptance rate."}, []string{"source"}),
		tenantTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_tenant_generated_tokens_total",
			Help: "Output tokens generated, by tenant: the shares fairness divides."}, []string{"tenant"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_admissions_total",
			Help: "Jobs admitted to the running batch for the first time, by admission: reserved (worst case reserved: low_latency, not preemptible, or high priority when configured) or optimistic (preemptible)."}, []string{"admission"}),
		stepTokens: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zerolayer_step_tokens",
			Help: "Tokens per forward step (decode rows plus prefill chunks).", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
	}
	for i, name := range sourceNames {
		m.draftedBy[i] = m.drafted.WithLabelValues(name)
		m.acceptedBy[i] = m.draftAccepted.WithLabelValues(name)
	}
	waits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_wait_steps_total",
		Help: "Forward steps run while jobs waited, by what held them out of the batch first: memory (KV blocks), slots (max running), prefill_budget (the step's prompt tokens), prefix (another job computing their shared prompt blocks)."}, []string{"reason"})
	for i, r := range heldNames {
		m.waitSteps[i] = waits.WithLabelValues(r)
	}
	m.waitVec = waits
	return m
}

// heldNames are the wait_steps_total labels, in the order of heldWhy's
// bits.
var heldNames = [numHeld]string{"memory", "slots", "prefill_budget", "prefix"}

// Register registers every metric with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.running, m.waiting, m.kvUsed, m.kvFree, m.kvCached, m.kvUsage, m.hostUsed,
		m.prefixQueries, m.prefixHits, m.preemptions, m.swappedBytes, m.swapIns, m.swapGC, m.rejections, m.interrupted, m.reservedWaits, m.attaches, m.duplicated, m.drafted, m.draftAccepted, m.stepTokens, m.tenantTokens, m.admissions, m.waitVec} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe refreshes the gauges; called by the step loop.
func (m *Metrics) observe(s *Scheduler) {
	m.running.Set(float64(len(s.running)))
	m.waiting.Set(float64(len(s.waiting)))
	used := s.bm.used()
	m.kvUsed.Set(float64(used))
	m.kvFree.Set(float64(s.bm.available()))
	m.kvCached.Set(float64(s.bm.cached()))
	m.kvUsage.Set(float64(used) / float64(s.bm.n))
	m.hostUsed.Set(float64(s.host.used))
	m.prefixQueries.Add(float64(s.bm.lookups - m.lastQ))
	m.prefixHits.Add(float64(s.bm.hits - m.lastHits))
	m.lastQ, m.lastHits = s.bm.lookups, s.bm.hits
}

// admissionLabel is the admissions counter's label for a job.
func admissionLabel(reserved bool) string {
	if reserved {
		return "reserved"
	}
	return "optimistic"
}

func (m *Metrics) admitted(reserved bool) {
	m.admissions.WithLabelValues(admissionLabel(reserved)).Inc()
}

// Admissions returns the jobs admitted so far with their worst case
// reserved (reserved true) or optimistically.
func (m *Metrics) Admissions(reserved bool) float64 {
	return counterValue(m.admissions.WithLabelValues(admissionLabel(reserved)))
}

// TenantTokens returns the output tokens generated for tenant so far.
func (m *Metrics) TenantTokens(tenant string) float64 {
	return counterValue(m.tenantTokens.WithLabelValues(tenant))
}

// heldWhy is a set of reasons admission left jobs waiting at one step.
type heldWhy uint8

const (
	heldMemory  heldWhy = 1 << iota // the arena could not take the job beside what is promised
	heldSlots                       // MaxRunning sequences were running
	heldCompute                     // the step's prefill budget was taken by other prompts
	heldPrefix                      // the job waits for another to compute its prompt's blocks
	numHeld             = iota

	heldNone heldWhy = 0
)

func (h *heldWhy) note(why heldWhy) { *h |= why }

// first is the index of the first reason of h in the order of the
// constants (memory before slots before compute), or -1 for none.
func (h heldWhy) first() int {
	for i := 0; i < numHeld; i++ {
		if h&(1<<i) != 0 {
			return i
		}
	}
	return -1
}

// Drafted returns the draft tokens of source ("grammar", "context")
// verified so far, and DraftAccepted those accepted.
func (m *Metrics) Drafted(source string) float64 {
	return counterValue(m.drafted.WithLabelValues(source))
}

// DraftAccepted: see Drafted.
func (m *Metrics) DraftAccepted(source string) float64 {
	return counterValue(m.draftAccepted.WithLabelValues(source))
}

func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	return d.GetCounter().GetValue()
}
