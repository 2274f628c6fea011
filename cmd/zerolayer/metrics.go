package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsPath is where every service (worker, gateway, billing, dev)
// serves its metrics; ops/prometheus/prometheus.yml scrapes it.
const metricsPath = "/metrics"

// metricsHandler serves reg in the Prometheus exposition formats at
// metricsPath, and nothing else.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// serveMetrics serves reg (plus Go runtime metrics) on addr at /metrics,
// and the probes: /healthz (200 while the process serves HTTP) and /readyz
// (200 when rd says ready, else 503 with its reason; always 200 when rd is
// nil).
func serveMetrics(addr string, reg *prometheus.Registry, rd *readiness) (func(), error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: metricsMux(reg, rd), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "metrics on http://%s%s\n", l.Addr(), metricsPath)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// metricsMux serves /metrics from reg and the probes /healthz and /readyz
// (from rd).
func metricsMux(reg *prometheus.Registry, rd *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(metricsPath, metricsHandler(reg))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := rd.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// readiness is what /readyz answers for a service: the reason it is not
// ready yet (set with waiting while it starts), then a check of the
// running service (set with check). The zero value is ready.
type readiness struct{ f atomic.Pointer[func() error] }

// waiting makes the service not ready, for reason.
func (r *readiness) waiting(reason string) {
	err := errors.New(reason)
	r.check(func() error { return err })
}

// check makes f decide readiness from now on.
func (r *readiness) check(f func() error) { r.f.Store(&f) }

// ready is nil when the service is ready, else why not.
func (r *readiness) ready() error {
	if r == nil {
		return nil
	}
	if f := r.f.Load(); f != nil {
		return (*f)()
	}
	return nil
}
