package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
)

// TestNATSConfigLimits: under the shipped config billing writes ZL_LIMITS,
// the worker and the gateway follow it (the gateway also hears results,
// to count jobs in flight), and a tenant cannot write its own limits.
func TestNATSConfigLimits(t *testing.T) {
	_, connect := shippedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wjs, _ := jetstream.New(connect("worker"))
	if err := contracts.EnsureStreams(ctx, wjs, contracts.StreamsConfig{}); err != nil {
		t.Fatalf("the worker provisions the streams and the limits bucket: %v", err)
	}
	bjs, _ := jetstream.New(connect("billing"))
	kv, err := bjs.KeyValue(ctx, contracts.TenantLimitsBucket)
	if err != nil {
		t.Fatalf("billing opens %s: %v", contracts.TenantLimitsBucket, err)
	}
	if _, err := kv.Put(ctx, "acme", []byte(`{}`)); err != nil {
		t.Fatalf("billing writes the limits: %v", err)
	}
	for _, role := range []string{"worker", "gateway"} {
		_, stop, err := startQuota(ctx, connect(role), role, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("the %s follows the limits: %v", role, err)
		}
		stop()
	}
	tjs, _ := jetstream.New(connect("acme"))
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if _, err := tjs.Publish(pctx, "$KV."+contracts.TenantLimitsBucket+".acme", []byte(`{}`)); err == nil {
		t.Fatal("acme wrote its own limits")
	}
}
