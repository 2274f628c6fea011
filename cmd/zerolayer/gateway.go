package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

// runGateway serves the HTTP APIs (producer/gateway) in front of NATS.
func runGateway(ctx context.Context, args []string) error {
	fs := newFlags("gateway")
	nf := addNATSFlag(fs)
	listen := fs.String("listen", ":8080", "HTTP address")
	keysFile := fs.String("keys", os.Getenv("ZEROLAYER_API_KEYS_FILE"), "key file written by 'zerolayer keys add' (hashed keys; reread when it changes, so a revoke needs no restart) (env ZEROLAYER_API_KEYS_FILE; for development also env ZEROLAYER_API_KEYS=KEY=TENANT,…, plain keys)")
	tenantHeader := fs.Bool("insecure-tenant-header", false, "without --keys, take the tenant from the X-Zerolayer-Tenant header (development only: anyone can act as any tenant)")
	syncTimeout := fs.Duration("sync-timeout", 10*time.Minute, "how long a synchronous call (chat completions, messages) waits for its job")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long open requests may finish")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9401)")
	replicas := fs.Int("replicas", 1, "replicas of the batch buckets (ZL_BATCH_FILES, ZL_BATCH_STATES, ZL_BATCH_LEASES) the gateway makes: 3 in production, as the streams")
	batchLease := fs.Duration("batch-lease", 15*time.Second, "how long a batch whose gateway died waits before another gateway takes it over (the same on every replica)")
	limits := fs.Bool("limits", true, "enforce the tenants' limits (zerolayer tenants set-limits), as published by billing in ZL_LIMITS: 429 with Retry-After")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	keys, err := gatewayKeys(*keysFile, logger)
	if err != nil {
		return err
	}
	if keys == nil && !*tenantHeader {
		return usagef("give --keys FILE (make one with 'zerolayer keys add'), or --insecure-tenant-header for development")
	}
	nc, err := nf.connect("gateway", nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	gm := gateway.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := gm.Register(reg); err != nil {
		return err
	}
	gcfg := gateway.Config{Keys: keys, TenantHeader: *tenantHeader, SyncTimeout: *syncTimeout, Models: modelFiles(), Logger: logger, Metrics: gm, Replicas: *replicas, BatchLease: *batchLease}
	if *limits {
		q, stop, err := startQuota(ctx, nc, "gateway", reg, logger)
		if err != nil {
			return err
		}
		defer stop()
		gcfg.Quota = q
	}
	var rd readiness
	rd.waiting("starting the HTTP server")
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, reg, &rd)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	gs, err := devstack.ServeGateway(nc, *listen, gcfg)
	if err != nil {
		return err
	}
	rd.check(func() error {
		if st := nc.Status(); st != nats.CONNECTED {
			return fmt.Errorf("NATS connection %s", st)
		}
		return nil
	})
	nkeys := 0
	if keys != nil {
		nkeys = keys.Len()
	}
	fmt.Fprintf(os.Stderr, "gateway: http://%s (jobs: /v1/jobs; OpenAI: /v1/chat/completions; Anthropic: /v1/messages), NATS %s, %d API keys\n",
		gs.Addr(), nc.ConnectedUrlRedacted(), nkeys)
	<-ctx.Done()
	rd.waiting("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	return gs.Stop(sctx)
}

// gatewayKeys is the keyring of the key file at path (reread when it
// changes) and of ZEROLAYER_API_KEYS=KEY=TENANT,… (plain keys for
// development, hashed at once); nil when there are neither.
func gatewayKeys(path string, logger *slog.Logger) (*gateway.Keyring, error) {
	plain := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("ZEROLAYER_API_KEYS"), ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, t, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("ZEROLAYER_API_KEYS: want KEY=TENANT,… (got an entry without '=')")
		}
		if weakAPIKey(k) {
			return nil, usagef("ZEROLAYER_API_KEYS: the key of tenant %s is a placeholder or shorter than %d characters; make real keys with 'zerolayer keys add' (or 'zerolayer secrets init')", t, minPlainKeyLen)
		}
		plain[k] = t
	}
	if path == "" && len(plain) == 0 {
		return nil, nil
	}
	if len(plain) > 0 {
		fmt.Fprintf(stderr, "zerolayer gateway: %d plain-text keys from ZEROLAYER_API_KEYS (for development; in production use --keys FILE, written by 'zerolayer keys add')\n", len(plain))
	}
	return gateway.NewKeyring(gateway.KeyringConfig{File: path, Keys: plain, Logger: logger})
}

// minPlainKeyLen is the shortest plain key the gateway takes from
// ZEROLAYER_API_KEYS: a key anyone could guess is no key.
const minPlainKeyLen = 20

// weakAPIKey reports a plain key that is a placeholder (change-me…) or
// too short to be secret.
func weakAPIKey(k string) bool {
	l := strings.ToLower(k)
	return len(k) < minPlainKeyLen || strings.Contains(l, "change-me") || strings.Contains(l, "changeme")
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
