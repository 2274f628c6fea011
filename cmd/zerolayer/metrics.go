package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
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

// serveMetrics serves reg (plus Go runtime metrics) on addr at
// metricsPath.
func serveMetrics(addr string, reg *prometheus.Registry) (func(), error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: metricsHandler(reg), ReadHeaderTimeout: 5 * time.Second}
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
