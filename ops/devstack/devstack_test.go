package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/ops/devstack/devstacktest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
)

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
	announce := filepath.Join(t.TempDir(), "dev.json")
	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0", AnnounceFile: announce})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := st.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	dbURL := st.DatabaseURL()
	if st.DatabaseNote() != devstack.Redact(dbURL) || st.GatewayAddr() == "" {
		t.Errorf("database %q, gateway %q", st.DatabaseNote(), st.GatewayAddr())
	}
	// Other commands find the running stack through the announce file.
	e, ok, err := devstack.Discover(announce)
	if err != nil || !ok || e.NATSURL != st.NATSURL() || e.DatabaseURL != dbURL || e.GatewayAddr != st.GatewayAddr() || e.PID != os.Getpid() {
		t.Errorf("Discover: %+v, %v, %v", e, ok, err)
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
	if err := errors.Join(st.Stop(sctx), st.Stop(sctx)); err != nil {
		t.Fatalf("Stop twice: %v", err)
	}
	if _, err := os.Stat(announce); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("announce file after Stop: %v", err)
	}
}

// TestDiscover: no file and a stale file (its process gone) both mean no
// stack; a file of a live process is read.
func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, ok, err := devstack.Discover(filepath.Join(dir, "none.json")); ok || err != nil {
		t.Errorf("no file: %v, %v", ok, err)
	}
	// A process that has exited: this test's child, waited for.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(name string, pid int) string {
		p := filepath.Join(dir, name)
		b := fmt.Sprintf(`{"pid": %d, "nats_url": "nats://127.0.0.1:4999", "database_url": "postgres://x"}`, pid)
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, ok, err := devstack.Discover(write("stale.json", cmd.Process.Pid)); ok || err != nil {
		t.Errorf("stale file: %v, %v", ok, err)
	}
	e, ok, err := devstack.Discover(write("live.json", os.Getpid()))
	if !ok || err != nil || e.NATSURL != "nats://127.0.0.1:4999" {
		t.Errorf("live file: %+v, %v, %v", e, ok, err)
	}
	if _, _, err := devstack.Discover(filepath.Join(dir, "bad.json")); err != nil {
		t.Errorf("missing: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600)
	if _, ok, err := devstack.Discover(filepath.Join(dir, "bad.json")); ok || err == nil {
		t.Errorf("corrupt file: %v, %v", ok, err)
	}
}

// TestRunDemo runs the demo scenario on a stack without a gateway of its
// own (the demo serves one for its HTTP question) and checks every part
// of its report is there.
func TestRunDemo(t *testing.T) {
	t.Parallel()
	st := devstacktest.Start(t, devstack.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	if err := devstack.RunDemo(ctx, st, &out); err != nil {
		t.Fatalf("RunDemo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"submitted 14 jobs: 10 from acme (bulk, low/normal), 4 from globex (high/normal)\n",
		"── streaming job ", "── POST /v1/chat/completions (OpenAI-compatible, tenant globex, job ",
		"all 14 jobs finished in ", ": 14 completed, 0 failed, 0 canceled;",
		"── billing report: acme ──", "── billing report: globex ──", "── batch report: acme demo-",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output without %q:\n%s", want, out.String())
		}
	}
	if st.GatewayAddr() != "" {
		t.Errorf("the demo's gateway outlived it: %q", st.GatewayAddr())
	}
}

// TestGatewaySequentialCalls: chat completions one after another through
// the gateway of an otherwise idle stack (worker, billing and all), as a
// new user tries it. Each answers in milliseconds; none may wait for a
// result its client's subscription already carried (Wait's 2 s recheck:
// it used to catch 2% of calls, the look-up racing the stream's store).
func TestGatewaySequentialCalls(t *testing.T) {
	t.Parallel()
	st := devstacktest.Start(t, devstack.Config{HTTPAddr: "127.0.0.1:0"})
	body := `{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4}`
	var ms []float64
	for range 400 {
		req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+st.GatewayAddr()+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(gateway.TenantHeader, "acme")
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		ms = append(ms, float64(time.Since(began).Microseconds())/1000)
	}
	slices.Sort(ms)
	t.Logf("400 calls: p50 %.1f ms, p99 %.1f ms, max %.1f ms", ms[len(ms)/2], ms[len(ms)*99/100], ms[len(ms)-1])
	if slow := len(ms) - sort.SearchFloat64s(ms, 1000); slow > 0 {
		t.Errorf("%d of 400 calls took over a second (slowest %.0f ms)", slow, ms[len(ms)-1])
	}
}
