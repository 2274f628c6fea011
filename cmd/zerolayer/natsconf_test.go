package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// TestNATSConfigPermissions runs a server from ops/nats/nats.conf (port,
// monitoring and store moved aside) and checks each role can do its work
// and no more: the worker provisions the streams; the gateway creates its
// batch buckets, submits for any tenant, stores a batch and looks results
// up; a tenant publishes jobs on its own subject and not on another's,
// submits, looks up and cancels with the Go client, and has no JetStream
// API on ZL_JOBS, ZL_USAGE or ZL_DLQ.
func TestNATSConfigPermissions(t *testing.T) {
	for k, v := range map[string]string{"ZL_WORKER_PASSWORD": "w", "ZL_BILLING_PASSWORD": "b", "ZL_GATEWAY_PASSWORD": "g",
		"ZL_TENANT_ACME_PASSWORD": "a", "ZL_SYS_PASSWORD": "s"} {
		t.Setenv(k, v)
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "ops", "nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, 0, t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	connect := func(user, pass string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pass), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wjs, _ := jetstream.New(connect("worker", "w"))
	if err := contracts.EnsureStreams(ctx, wjs, contracts.StreamsConfig{}); err != nil {
		t.Fatalf("the worker provisions the streams: %v", err)
	}

	keys, err := gateway.NewKeyring(gateway.KeyringConfig{Keys: map[string]string{"k-globex": "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(connect("gateway", "g"), gateway.Config{Keys: keys})
	if err != nil {
		t.Fatalf("the gateway starts (and creates its buckets): %v", err)
	}
	defer gw.Close()
	hs := httptest.NewServer(gw)
	defer hs.Close()
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k-globex")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		b, _ := json.Marshal(v)
		return resp.StatusCode, string(b)
	}
	job := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`
	if code, body := post("/v1/jobs", job); code != 202 {
		t.Fatalf("the gateway submits for globex: %d %s", code, body)
	}
	if code, body := post("/v1/batches?id=b1", `{"custom_id":"a","request":`+job+`}`+"\n"); code != 202 {
		t.Fatalf("the gateway stores a batch: %d %s", code, body)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/jobs/some-job", nil)
	req.Header.Set("Authorization", "Bearer k-globex")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 202 {
		t.Fatalf("the gateway looks a result up: %v %v", resp, err)
	}

	checkLimitsPermissions(ctx, t, connect)

	tjs, _ := jetstream.New(connect("acme", "a"))
	pub := func(subject string) error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := tjs.Publish(pctx, subject, []byte(job))
		return err
	}
	if err := pub(contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "acme")); err != nil {
		t.Fatalf("acme publishes on its own subject: %v", err)
	}
	if err := pub(contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "globex")); err == nil {
		t.Fatal("acme published a job as globex")
	}
	if err := pub("zl.jobs.urgent.short.acme"); err == nil {
		t.Fatal("a job on an unknown priority was stored")
	}
	rc, err := tjs.OrderedConsumer(ctx, contracts.StreamResults, jetstream.OrderedConsumerConfig{FilterSubjects: []string{contracts.ResultsSubject("some-job")}})
	if err != nil {
		t.Fatalf("acme reads results through a consumer of its own: %v", err)
	}
	if _, err := rc.Next(jetstream.FetchMaxWait(200 * time.Millisecond)); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("acme waits for a result: %v", err)
	}
	workers := contracts.ConsumerName(contracts.PriorityNormal, contracts.BucketShort)
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if err := tjs.DeleteConsumer(dctx, contracts.StreamJobs, workers); err == nil {
		t.Fatal("acme deleted the workers' consumer")
	}
	if _, err := wjs.Consumer(ctx, contracts.StreamJobs, workers); err != nil {
		t.Fatalf("the workers' consumer after acme tried to delete it: %v", err)
	}

	// The Go client, as tenant acme: submit, look a result up, cancel.
	pc, err := producer.New(connect("acme", "a"), producer.Config{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := pc.Submit(ctx, &contracts.JobRequest{Model: "m", MaxTokens: 4, Messages: []contracts.Message{{Role: "user", Content: "hi"}}}, nil)
	if err != nil {
		t.Fatalf("acme submits with the Go client: %v", err)
	}
	if res, err := pc.Result(ctx, id); err != nil || res != nil {
		t.Fatalf("acme looks its (pending) result up: %v %v", res, err)
	}
	if err := pc.Cancel(ctx, id); err != nil {
		t.Fatalf("acme cancels its job: %v", err)
	}
	// No JetStream API on the streams that hold other tenants' jobs,
	// usage and dead letters: no info (which lists subjects, tenants and
	// job ids among them), no message read (a queued prompt, a DLQ
	// record with its request).
	tnc := connect("acme", "a")
	if _, err := tnc.Request("$JS.API.STREAM.MSG.GET."+contracts.StreamResults, []byte(`{"seq":1}`), 2*time.Second); err != nil {
		t.Fatalf("acme's message read on ZL_RESULTS gets no answer (the refusals below would prove nothing): %v", err)
	}
	for _, stream := range []string{contracts.StreamJobs, contracts.StreamUsage, contracts.StreamDLQ} {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		if _, err := tjs.Stream(sctx, stream); err == nil {
			t.Errorf("acme reads the info of %s", stream)
		}
		scancel()
		raw, err := tnc.Request("$JS.API.STREAM.MSG.GET."+stream, []byte(`{"seq":1}`), time.Second)
		if err == nil && !strings.Contains(string(raw.Data), `"error"`) {
			t.Errorf("acme reads message 1 of %s: %s", stream, raw.Data)
		}
	}
}

// checkLimitsPermissions: billing writes ZL_LIMITS; the worker and the
// gateway follow it (the gateway also hears results); a tenant cannot
// write its own limits.
func checkLimitsPermissions(ctx context.Context, t *testing.T, connect func(user, pass string) *nats.Conn) {
	t.Helper()
	bjs, _ := jetstream.New(connect("billing", "b"))
	kv, err := bjs.KeyValue(ctx, contracts.TenantLimitsBucket)
	if err != nil {
		t.Fatalf("billing opens %s: %v", contracts.TenantLimitsBucket, err)
	}
	if _, err := kv.Put(ctx, "acme", []byte(`{}`)); err != nil {
		t.Fatalf("billing writes the limits: %v", err)
	}
	for _, role := range []struct{ user, pass, domain string }{{"worker", "w", "worker"}, {"gateway", "g", "gateway"}} {
		_, stop, err := startQuota(ctx, connect(role.user, role.pass), role.domain, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("the %s follows the limits: %v", role.user, err)
		}
		stop()
	}
	tjs, _ := jetstream.New(connect("acme", "a"))
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := tjs.Publish(pctx, "$KV."+contracts.TenantLimitsBucket+".acme", []byte(`{}`)); err == nil {
		t.Fatal("acme wrote its own limits")
	}
}
