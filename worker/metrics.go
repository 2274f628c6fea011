package worker

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// Metrics are the worker's per-job Prometheus metrics, named after vLLM's.
type Metrics struct {
	ttft      *prometheus.HistogramVec
	tpot      *prometheus.HistogramVec
	queue     *prometheus.HistogramVec
	e2e       *prometheus.HistogramVec
	jobs      *prometheus.CounterVec
	tokensIn  prometheus.Counter
	tokensOut prometheus.Counter
	toolRuns  *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	modelInfo *prometheus.GaugeVec // zerolayer_model_info
	// intake health
	consMissing   *prometheus.GaugeVec
	consRecreated *prometheus.CounterVec
	fetches       prometheus.Counter
	fetched       prometheus.Counter
	leaseLapses   prometheus.Counter
	forwards      prometheus.Counter
	affinity      *prometheus.CounterVec
}

// NewMetrics returns unregistered metrics. The per-job histograms and the
// jobs counter carry the model that ran the job (one the worker serves;
// empty for a job that failed before a model ran it, so that a tenant's
// model names cannot grow the series), the histograms also the priority
// and the prompt-length bucket.
func NewMetrics() *Metrics {
	lat := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	labels := []string{"priority", "bucket"}
	h := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zerolayer_" + name, Help: help, Buckets: lat}, append([]string{"model"}, labels...))
	}
	return &Metrics{
		ttft:  h("time_to_first_token_seconds", "Time from admission to the first output token."),
		tpot:  h("time_per_output_token_seconds", "Mean time per output token after the first, per job."),
		queue: h("request_queue_time_seconds", "Time from JetStream storing the job to its admission."),
		e2e:   h("e2e_request_latency_seconds", "Time from JetStream storing the job to its end."),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_jobs_total",
			Help: "Jobs finished, by status, error code and model."}, []string{"status", "code", "model"}),
		tokensIn:  prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_prompt_tokens_total", Help: "Prompt tokens of finished jobs."}),
		tokensOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_generation_tokens_total", Help: "Generated tokens of finished jobs."}),
		toolRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_tool_runs_total",
			Help: "Inline tools run on finished jobs, by how they fared (ok, violated, failed, dropped; contracts.ToolStatus) and model."}, []string{"status", "model"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_tool_fallbacks_total",
			Help: "Jobs answered with their fallback_response because a tool failed (on_tool_failure fallback, or retry_without_tool failing again), by model."}, []string{"model"}),
		modelInfo: newModelInfo(),
		consMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "zerolayer_intake_consumer_missing",
			Help: "1 while the ZL_JOBS consumer of a class this worker serves is missing and not recreated (jobs of the class are not served), else 0."}, labels),
		consRecreated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_intake_consumer_recreations_total",
			Help: "ZL_JOBS consumers found deleted and recreated by this worker."}, labels),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_intake_fetch_requests_total",
			Help: "Pull requests the intake sent to ZL_JOBS consumers."}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_intake_jobs_fetched_total",
			Help: "Jobs those pull requests brought: over fetch requests, the jobs per request."}),
		forwards: prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_intake_jobs_forwarded_total",
			Help: "Jobs of a model-less subject (queued by an earlier release) that this worker pulled for a model it does not serve and republished on their model's subject, for the workers serving it."}),
		affinity: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_affinity_jobs_total",
			Help: "Prefix affinity: jobs this worker passed on to the worker holding their prompt's prefix (passed_on), took from its own queue (taken), and took from another worker's queue where they had waited too long or whose worker was gone (stolen)."}, []string{"action"}),
		leaseLapses: prometheus.NewCounter(prometheus.CounterOpts{Name: "zerolayer_worker_lease_lapses_total",
			Help: "Times this worker's heartbeats (InProgress) were confirmed later than the ack wait while it held jobs: those jobs may have been redelivered and run twice (billed once)."}),
	}
}

// Register registers every metric with r, and the inline tools' compile
// cache counters.
func (m *Metrics) Register(r prometheus.Registerer) error {
	toolMetrics := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerolayer_tool_compile_cache_hits_total",
			Help: "Inline tools found compiled in the cache (by schema hash and tokenizer)."},
			func() float64 { return float64(tools.ReadMetrics().CacheHits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerolayer_tool_compile_cache_misses_total",
			Help: "Inline tools compiled (cache misses)."},
			func() float64 { return float64(tools.ReadMetrics().CacheMisses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zerolayer_tool_compile_seconds_total",
			Help: "Time spent compiling inline tools (schemas, patterns, word lists)."},
			func() float64 { return float64(tools.ReadMetrics().CompileNanos) / 1e9 }),
	}
	for _, c := range append([]prometheus.Collector{m.ttft, m.tpot, m.queue, m.e2e, m.jobs, m.tokensIn, m.tokensOut, m.toolRuns, m.fallbacks, m.modelInfo, m.consMissing, m.consRecreated, m.fetches, m.fetched, m.leaseLapses, m.forwards, m.affinity}, toolMetrics...) {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe records a finished job: its usage (nil for a job no model ran)
// and its inline tools' reports.
func (m *Metrics) observe(status contracts.ResultStatus, e *contracts.Error, u *contracts.Usage, tools []contracts.ToolReport) {
	if m == nil {
		return
	}
	code, model := "", ""
	if e != nil {
		code = string(e.Code)
	}
	if u != nil {
		// The served name (ServedName): a job names its model in any case.
		model = strings.ToLower(u.Model)
	}
	m.jobs.WithLabelValues(string(status), code, model).Inc()
	for _, r := range tools {
		m.toolRuns.WithLabelValues(string(r.Status), model).Inc()
	}
	if u == nil {
		return
	}
	if u.Fallback {
		m.fallbacks.WithLabelValues(model).Inc()
	}
	l := prometheus.Labels{"model": model, "priority": string(u.Priority), "bucket": string(u.Bucket)}
	m.ttft.With(l).Observe(u.TimeToFirstTokenMs / 1000)
	if u.OutputTokens > 1 {
		m.tpot.With(l).Observe(u.TimePerTokenMs / 1000)
	}
	m.queue.With(l).Observe(u.QueueMs / 1000)
	m.e2e.With(l).Observe((u.QueueMs + u.TotalMs) / 1000)
	m.tokensIn.Add(float64(u.InputTokens))
	m.tokensOut.Add(float64(u.OutputTokens))
}

// consumerMissing records whether the consumer of a class is missing.
func (m *Metrics) consumerMissing(p contracts.Priority, b contracts.Bucket, missing bool) {
	if m == nil {
		return
	}
	v := 0.0
	if missing {
		v = 1
	}
	m.consMissing.WithLabelValues(string(p), string(b)).Set(v)
}

// consumerRecreated counts a consumer recreated after it was deleted.
func (m *Metrics) consumerRecreated(p contracts.Priority, b contracts.Bucket) {
	if m == nil {
		return
	}
	m.consRecreated.WithLabelValues(string(p), string(b)).Inc()
}

// forwarded counts a job of a model-less subject passed on to the workers
// of its model (not by model: the name is the tenant's word).
func (m *Metrics) forwarded() {
	if m == nil {
		return
	}
	m.forwards.Inc()
}

// affine counts n jobs of a prefix-affinity action: passed_on, taken or
// stolen.
func (m *Metrics) affine(action string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.affinity.WithLabelValues(action).Add(float64(n))
}

// AffinityJobs returns the jobs counted for a prefix-affinity action.
func (m *Metrics) AffinityJobs(action string) float64 {
	if m == nil {
		return 0
	}
	var d dto.Metric
	if m.affinity.WithLabelValues(action).Write(&d) != nil {
		return 0
	}
	return d.GetCounter().GetValue()
}

// fetch counts a pull request that brought n jobs.
func (m *Metrics) fetch(n int) {
	if m == nil {
		return
	}
	m.fetches.Inc()
	m.fetched.Add(float64(n))
}

// leaseLapse counts heartbeats confirmed later than the ack wait.
func (m *Metrics) leaseLapse() {
	if m == nil {
		return
	}
	m.leaseLapses.Inc()
}
