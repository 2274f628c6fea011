package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// storiesPath is the shared TinyStories model; the test skips without it.
func storiesPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared model not present: %v", err)
	}
	return p
}

// schemaURL is a database URL whose connections use a fresh schema of
// their own (dropped when the test ends), so the stack's migrations and
// rows stay out of everyone else's way.
func schemaURL(t *testing.T) string {
	t.Helper()
	return dbtest.SchemaURL(t, dbtest.EmptyPool(t))
}

// waitFor polls cond until it holds or 30 seconds pass.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     devstack.Config
		wantErr bool
	}{
		{"no dir", devstack.Config{}, true},
		{"port out of range", devstack.Config{Dir: "x", NATSPort: 70000}, true},
		{"negative concurrency", devstack.Config{Dir: "x", Concurrency: -1}, true},
		{"defaults", devstack.Config{Dir: "x"}, false},
	}
	for _, tt := range tests {
		if _, err := devstack.New(tt.cfg); (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v, want an error: %v", tt.name, err, tt.wantErr)
		}
	}
	d := devstack.Config{Dir: "x", Models: worker.ModelsConfig{Executor: worker.ExecutorInOrder}}.WithDefaults()
	if d.Models.Models[0] != devstack.DefaultModel || d.Concurrency != 4 || d.Logger == nil {
		t.Errorf("defaults: %+v", d)
	}
}

// TestStack starts the whole stack and runs one job through it: submitted
// with the Go producer, run by the worker, its usage rated by billing, and
// the same model answering through the HTTP gateway.
func TestStack(t *testing.T) {
	t.Parallel()
	model := storiesPath(t)
	dbURL := schemaURL(t)
	st, err := devstack.New(devstack.Config{Dir: t.TempDir(), DatabaseURL: dbURL, HTTPAddr: "127.0.0.1:0",
		Models: worker.ModelsConfig{Models: []string{model}, Threads: 1, Sched: sched.Config{KVBlocks: 64, HostSwapMB: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			st.Stop(context.Background())
		}
	})
	if st.DatabaseNote() != "DATABASE_URL" || st.GatewayAddr() == "" {
		t.Errorf("database %q, gateway %q", st.DatabaseNote(), st.GatewayAddr())
	}
	names := st.Models().Names()
	if len(names) != 1 || names[0] != "stories260k" {
		t.Fatalf("serving %v", names)
	}

	c, err := producer.New(st.Conn(), producer.Config{Tenant: "acme", Models: st.Models().Paths()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Submit(ctx, &contracts.JobRequest{Model: names[0], MaxTokens: 8, Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != contracts.StatusCompleted || res.Usage == nil || res.Usage.OutputTokens != 8 || res.Usage.WorkerID != "dev-worker" {
		t.Fatalf("result %+v", res)
	}
	waitFor(t, "charge of "+id, func() (bool, error) {
		var n int
		err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM charges WHERE job_id = $1", id).Scan(&n)
		return n == 1, err
	})
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4}`, names[0])
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+st.GatewayAddr()+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(gateway.TenantHeader, "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("gateway: status %d", resp.StatusCode)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	stopped = true
	if err := errors.Join(st.Stop(sctx), st.Stop(sctx)); err != nil {
		t.Fatalf("Stop twice: %v", err)
	}
}
