package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus metrics: requests by route and
// status, and their latency (to the end of the answer, streams included).
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zerolayer_gateway_requests_total",
			Help: "HTTP requests answered, by route and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zerolayer_gateway_request_seconds",
			Help:    "Time to answer an HTTP request (to the end of a stream), by route.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"route"}),
	}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.latency} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observe wraps h, recording each request under the pattern that served
// it. An answer aborted part-way (a download whose read failed: a panic,
// http.ErrAbortHandler) is recorded with the code "aborted".
func (m *Metrics) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		answered := false
		defer func() {
			code := strconv.Itoa(rec.code)
			if !answered {
				code = "aborted" // the panic goes on, as it was
			}
			route := r.Pattern // set by the ServeMux
			if route == "" {
				route = "unmatched"
			}
			m.requests.WithLabelValues(route, code).Inc()
			m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		h.ServeHTTP(rec, r)
		answered = true
	})
}

// statusRecorder remembers the status code; it flushes, for streams.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
