package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProbes: /healthz answers 200 whatever the readiness; /readyz answers
// 503 with the reason while the service is starting or its check fails,
// and 200 once the check passes.
func TestProbes(t *testing.T) {
	var rd readiness
	srv := httptest.NewServer(metricsMux(prometheus.NewRegistry(), &rd))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(path string, code int, body string) {
		t.Helper()
		if c, b := get(path); c != code || !strings.Contains(b, body) {
			t.Fatalf("%s: %d %q, want %d with %q", path, c, b, code, body)
		}
	}
	rd.waiting("loading models")
	expect("/healthz", http.StatusOK, "ok")
	expect("/readyz", http.StatusServiceUnavailable, "loading models")
	var failing error = errors.New("NATS connection RECONNECTING")
	rd.check(func() error { return failing })
	expect("/readyz", http.StatusServiceUnavailable, "RECONNECTING")
	failing = nil
	expect("/readyz", http.StatusOK, "ready")
	expect("/healthz", http.StatusOK, "ok")
	if (*readiness)(nil).ready() != nil {
		t.Fatal("a nil readiness is not ready")
	}
}
