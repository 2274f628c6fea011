package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

// runGateway serves the HTTP APIs (producer/gateway) in front of NATS.
func runGateway(ctx context.Context, args []string) error {
	fs := newFlags("gateway")
	nf := addNATSFlag(fs)
	listen := fs.String("listen", ":8080", "HTTP address")
	keysFile := fs.String("keys", os.Getenv("ZEROLAYER_API_KEYS_FILE"), "file of API keys, one 'KEY TENANT' per line (env ZEROLAYER_API_KEYS_FILE; also env ZEROLAYER_API_KEYS=KEY=TENANT,…)")
	tenantHeader := fs.Bool("insecure-tenant-header", false, "without --keys, take the tenant from the X-Zerolayer-Tenant header (development only: anyone can act as any tenant)")
	syncTimeout := fs.Duration("sync-timeout", 10*time.Minute, "how long a synchronous call (chat completions, messages) waits for its job")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long open requests may finish")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9401)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	keys, err := readKeys(*keysFile)
	if err != nil {
		return err
	}
	for _, kv := range strings.Split(os.Getenv("ZEROLAYER_API_KEYS"), ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, t, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("ZEROLAYER_API_KEYS: want KEY=TENANT,… (got an entry without '=')")
		}
		keys[k] = t
	}
	if len(keys) == 0 && !*tenantHeader {
		return usagef("give --keys FILE (or --insecure-tenant-header for development)")
	}
	nc, err := nf.connect("gateway", nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	gm := gateway.NewMetrics()
	if *metricsAddr != "" {
		reg := prometheus.NewRegistry()
		if err := gm.Register(reg); err != nil {
			return err
		}
		stopMetrics, err := serveMetrics(*metricsAddr, reg)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	stop, addr, err := serveGateway(nc, *listen, gateway.Config{Keys: keys, TenantHeader: *tenantHeader, SyncTimeout: *syncTimeout,
		Models: modelFiles(), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Metrics: gm})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gateway: http://%s (jobs: /v1/jobs; OpenAI: /v1/chat/completions; Anthropic: /v1/messages), NATS %s, %d API keys\n",
		addr, nc.ConnectedUrlRedacted(), len(keys))
	<-ctx.Done()
	return stop(*shutdown)
}

// serveGateway serves a gateway on addr until stop is called.
func serveGateway(nc *nats.Conn, addr string, cfg gateway.Config) (stop func(time.Duration) error, bound string, err error) {
	gw, err := gateway.New(nc, cfg)
	if err != nil {
		return nil, "", err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		gw.Close()
		return nil, "", fmt.Errorf("gateway: %w", err)
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		}
	}()
	return func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return errors.Join(srv.Shutdown(ctx), gw.Close())
	}, l.Addr().String(), nil
}

// readKeys reads 'KEY TENANT' lines; blank lines and # comments are
// skipped.
func readKeys(path string) (map[string]string, error) {
	keys := map[string]string{}
	if path == "" {
		return keys, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want 'KEY TENANT'", path, n)
		}
		if _, dup := keys[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: the key repeats an earlier line", path, n)
		}
		keys[fields[0]] = fields[1]
	}
	return keys, sc.Err()
}

// modelFiles maps the names of the models on disk (file names without
// .gguf, lower case) to their files, for bucketing prompts by tokens.
func modelFiles() map[string]string {
	models := map[string]string{}
	for _, p := range store.Files(modelDirs()) {
		name := strings.ToLower(strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)))
		if _, ok := models[name]; !ok {
			models[name] = p
		}
	}
	return models
}
