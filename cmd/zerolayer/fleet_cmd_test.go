package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// TestModelsFleet: models fleet shows a live worker and its models, a
// model served lately by a worker gone, and what a submit does with each.
func TestModelsFleet(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, out, errOut := runCLI("models", "fleet", "--nats-url", srv.URL)
	if code != 0 || !strings.Contains(out, "no worker is live") {
		t.Fatalf("an empty fleet: status %d, %q %q", code, out, errOut)
	}
	bucket := func(name string, ttl time.Duration) jetstream.KeyValue {
		kv, err := srv.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	now := time.Now().UTC()
	w, _ := json.Marshal(contracts.WorkerInfo{WorkerID: "w1", Device: "cpu (2 threads)",
		Models: []contracts.WorkerModel{{Name: "stories260k", ContextTokens: 512, KVArenaMB: 16}}, StartedAt: now, UpdatedAt: now})
	if _, err := bucket(contracts.WorkersBucket, contracts.WorkersTTL).Put(ctx, contracts.ModelToken("w1"), w); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(contracts.ModelRecord{Model: "qwen3-s-f32", WorkerID: "w0", ServedAt: now})
	if _, err := bucket(contracts.ModelsBucket, contracts.ModelsTTL).Put(ctx, contracts.ModelToken("qwen3-s-f32"), m); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI("models", "fleet", "--nats-url", srv.URL)
	for _, want := range []string{"w1", "stories260k (context 512, KV 16 MB)", "qwen3-s-f32", "no worker live now", "refused at submit (unknown_model)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status %d, no %q in\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = runCLI("models", "fleet", "--nats-url", srv.URL, "--format", "json")
	var got struct {
		Workers []contracts.WorkerInfo `json:"workers"`
		Models  []struct {
			Model       string `json:"model"`
			LiveWorkers int    `json:"live_workers"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Workers) != 1 || len(got.Models) != 2 ||
		got.Models[0].Model != "qwen3-s-f32" || got.Models[0].LiveWorkers != 0 || got.Models[1].LiveWorkers != 1 {
		t.Fatalf("json: status %d, %v, %+v", code, err, got)
	}
	if code, _, errOut := runCLI("models", "fleet", "--format", "xml"); code != 2 || !strings.Contains(errOut, "--format") {
		t.Errorf("--format xml: status %d, %q", code, errOut)
	}
}
