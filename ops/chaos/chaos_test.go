//go:build chaos

// Package chaos is a bounded, loopback-only chaos suite: a three-node
// JetStream cluster in the test process, the zerolayer binary's workers,
// billing and gateway as separate processes, the machine's PostgreSQL, a
// mixed load from three tenants and a sequence of timed faults. Run it
// with `make chaos`; it is not part of `make test`.
package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

const (
	pgBase    = "postgres://postgres@127.0.0.1:5432/postgres"
	modelName = "stories260k"
)

// proc is one zerolayer process the suite runs.
type proc struct {
	name string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// procs starts and ends the zerolayer processes.
type procs struct {
	t   *testing.T
	bin string
	dir string
	env []string
	mu  sync.Mutex
	all []*proc
	gen int
}

func (ps *procs) start(name string, args ...string) *proc {
	ps.t.Helper()
	ps.mu.Lock()
	ps.gen++
	p := &proc{name: name, args: args, log: filepath.Join(ps.dir, fmt.Sprintf("%s-%d.log", name, ps.gen)), done: make(chan struct{})}
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	f, err := os.Create(p.log)
	if err != nil {
		ps.t.Fatal(err)
	}
	p.cmd = exec.Command(ps.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), ps.env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		ps.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

// signal sends sig and waits up to wait for the process to exit.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(wait):
		return false
	}
}

func (ps *procs) killAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.all {
		select {
		case <-p.done:
		default:
			p.signal(syscall.SIGKILL, 5*time.Second)
		}
	}
}

func (ps *procs) dumpLogs(t *testing.T) {
	for _, p := range ps.all {
		b, _ := os.ReadFile(p.log)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("---- %s (%s) tail:\n%s", p.name, p.log, b)
	}
}

// tb wraps the test for cluster calls made off the test goroutine: a
// failure is recorded and ends only that goroutine.
type tb struct {
	testing.TB
	mu  sync.Mutex
	err []string
}

func (w *tb) Helper() {}
func (w *tb) Fatalf(format string, args ...any) {
	w.mu.Lock()
	w.err = append(w.err, fmt.Sprintf(format, args...))
	w.mu.Unlock()
	runtime.Goexit()
}
func (w *tb) Fatal(args ...any) { w.Fatalf("%s", fmt.Sprint(args...)) }

// outcome is what became of one job the suite submitted.
type outcome struct {
	tenant string
	jobID  string
	via    string // go, runner, gateway
	// status of the line as its submitter saw it: completed, failed,
	// canceled, error (a record with an error and no result), or "" (no
	// answer at all).
	seen string
	code string
	// start and end bound a Go-client job: from its first submit to its
	// result.
	start, end time.Time
	// accepted is when its submit returned without an error.
	accepted time.Time
	// tries counts the submits and waits a Go-client job took.
	submits, waits int
}

type faultRow struct {
	at      time.Time
	name    string
	detail  string
	recover string
}

// pgVersion is the version of the machine's PostgreSQL cluster (the
// directory in /etc/postgresql).
func pgVersion() string {
	if ents, err := os.ReadDir("/etc/postgresql"); err == nil && len(ents) > 0 {
		return ents[0].Name()
	}
	return ""
}

// pgRun runs pg_ctlcluster sub (stop, start) on the machine's cluster.
func pgRun(t *testing.T, sub string) {
	cluster := pgVersion()
	out, err := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", cluster, "main", sub).CombinedOutput()
	if err != nil {
		t.Logf("pg_ctlcluster %s %s: %v: %s", cluster, sub, err, out)
	}
}

func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 13*time.Minute)
	defer cancel()
	root, _ := filepath.Abs("../..")
	model := filepath.Join(root, "..", "shared", "models", "stories260K", "stories260K.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Fatalf("model: %v (link ../shared)", err)
	}
	pgStop := 30 * time.Second
	if v := os.Getenv("CHAOS_PG_STOP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		pgStop = d
	}
	// CHAOS_LOGS keeps the processes' logs (and the suite's files) in
	// that folder instead of a temporary one.
	dir := t.TempDir()
	if v := os.Getenv("CHAOS_LOGS"); v != "" {
		if err := os.MkdirAll(v, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = v
	}

	// The binary.
	bin := filepath.Join(dir, "zerolayer")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/zerolayer").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	// PostgreSQL: a fresh schema, migrated by the binary.
	schema := fmt.Sprintf("chaos_%d", time.Now().Unix())
	pg, err := pgx.Connect(ctx, pgBase)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	if _, err := pg.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	pg.Close(ctx)
	dbURL := pgBase + "?search_path=" + schema
	t.Cleanup(func() { // whatever happens, PostgreSQL runs again
		if exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", pgVersion(), "main", "status").Run() != nil {
			pgRun(t, "start")
		}
	})
	if out, err := exec.Command(bin, "migrate", "up", "--database-url", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}

	// NATS.
	c := natstest.RunCluster(t, 3)
	if err := contracts.EnsureStreams(ctx, c.JS, contracts.StreamsConfig{Replicas: 3}); err != nil {
		t.Fatalf("streams: %v", err)
	}

	ps := &procs{t: t, bin: bin, dir: dir, env: []string{"ZEROLAYER_MODEL_PATH=" + filepath.Dir(model), "ZEROLAYER_DEV_FILE=" + filepath.Join(dir, "nodev.json")}}
	t.Cleanup(func() {
		ps.killAll()
		if t.Failed() {
			ps.dumpLogs(t)
		}
	})
	startWorker := func(i int) *proc {
		return ps.start(fmt.Sprintf("worker%d", i), "worker", "--nats-url", c.URL, "--model", model, "--replicas", "3",
			"--threads", "1", "--id", fmt.Sprintf("chaos-w%d-%d", i, time.Now().UnixNano()%100000), "--shutdown-timeout", "5s")
	}
	workers := []*proc{startWorker(0), startWorker(1), startWorker(2)}
	ps.start("billing", "billing", "--nats-url", c.URL, "--database-url", dbURL, "--replicas", "3")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gwAddr := l.Addr().String()
	l.Close()
	startGateway := func() *proc {
		return ps.start("gateway", "gateway", "--nats-url", c.URL, "--listen", gwAddr, "--insecure-tenant-header",
			"--replicas", "3", "--batch-lease", "3s", "--shutdown-timeout", "5s")
	}
	gw := startGateway()
	hc := &http.Client{Timeout: 10 * time.Second}
	waitServes := func(limit time.Duration) (time.Duration, bool) {
		t0 := time.Now()
		for time.Since(t0) < limit {
			if r, err := hc.Get("http://" + gwAddr + "/healthz"); err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					return time.Since(t0), true
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(t0), false
	}
	if _, ok := waitServes(60 * time.Second); !ok {
		t.Fatal("gateway does not serve")
	}

	clients := map[string]*producer.Client{}
	for _, tn := range []string{"acme", "globex", "initech"} {
		nc, _ := c.Connect(t)
		cl, err := producer.New(nc, producer.Config{Tenant: tn, Models: map[string]string{modelName: model}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		clients[tn] = cl
	}

	var (
		mu        sync.Mutex
		outcomes  []*outcome
		completed atomic.Int64 // Go-client jobs finished, the rate the faults are measured by
		doneAt    []time.Time  // when each of them finished
	)
	add := func(o *outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	req := func(i int) *contracts.JobRequest {
		return &contracts.JobRequest{Model: modelName, MaxTokens: 8 + i%9,
			Messages: []contracts.Message{{Role: "user", Content: fmt.Sprintf("Once upon a time %d", i)}}}
	}
	line := func(i int) string {
		b, _ := json.Marshal(req(i))
		return fmt.Sprintf(`{"custom_id":"l%04d","request":%s}`+"\n", i, b)
	}

	// Load 1: the Go client (acme), paced, until the faults are over.
	const goRate, goMax = 30, 4000
	stopLoad := make(chan struct{})
	var loadWG sync.WaitGroup
	tick := time.NewTicker(time.Second / goRate)
	defer tick.Stop()
	var next atomic.Int64
	// burst lets the Go client submit that many jobs at once, so that a
	// fault finds jobs in flight on every worker.
	burst := make(chan struct{}, 100)
	fillBurst := func() {
		for range 48 {
			burst <- struct{}{}
		}
		time.Sleep(30 * time.Millisecond)
	}
	run := fmt.Sprintf("%d", time.Now().Unix()%1000000)
	for range 24 {
		loadWG.Go(func() {
			cl := clients["acme"]
			for {
				select {
				case <-stopLoad:
					return
				case <-tick.C:
				case <-burst:
				}
				i := int(next.Add(1))
				if i > goMax {
					return
				}
				r := req(i)
				r.ID = fmt.Sprintf("cg%s-%05d", run, i)
				o := &outcome{tenant: "acme", jobID: r.ID, via: "go", start: time.Now()}
				add(o)
				for try := 0; ; try++ {
					sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
					_, err := cl.Submit(sctx, r, nil)
					scancel()
					mu.Lock()
					o.submits++
					if err == nil {
						o.accepted = time.Now()
					}
					mu.Unlock()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
				for {
					wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
					res, err := cl.Wait(wctx, r.ID)
					wcancel()
					mu.Lock()
					o.waits++
					mu.Unlock()
					if err == nil && res != nil {
						mu.Lock()
						o.seen, o.end = string(res.Status), time.Now()
						if res.Error != nil {
							o.code = string(res.Error.Code)
						}
						mu.Unlock()
						completed.Add(1)
						mu.Lock()
						doneAt = append(doneAt, time.Now())
						mu.Unlock()
						break
					}
					if ctx.Err() != nil {
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		})
	}

	// Load 2: the batch runner (globex), 400 lines.
	type runnerBatch struct {
		id     string
		out    *bytes.Buffer
		done   chan error
		cancel context.CancelFunc
	}
	var runners []runnerBatch
	startRunner := func(id string) {
		var in strings.Builder
		for i := range 400 {
			in.WriteString(line(i))
		}
		rctx, rcancel := context.WithCancel(ctx)
		rb := runnerBatch{id: id, out: &bytes.Buffer{}, done: make(chan error, 1), cancel: rcancel}
		runners = append(runners, rb)
		go func() {
			_, err := clients["globex"].RunBatch(rctx, strings.NewReader(in.String()), rb.out, producer.BatchOpts{ID: id})
			rb.done <- err
		}()
	}
	startRunner("rb" + run + "a")

	// Load 3: gateway batches, one at the start (acme) and one posted
	// before the gateway is stopped (initech).
	type gwBatch struct {
		tenant, id string
		n          int
	}
	var gwBatches []gwBatch
	postBatch := func(tenant, id string, n int) {
		t.Helper()
		var in strings.Builder
		for i := range n {
			in.WriteString(line(i))
		}
		r, _ := http.NewRequest("POST", "http://"+gwAddr+"/v1/zl/batches?id="+id, strings.NewReader(in.String()))
		r.Header.Set("X-Zerolayer-Tenant", tenant)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatalf("post batch %s: %v", id, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("post batch %s: %d %s", id, resp.StatusCode, b)
		}
		gwBatches = append(gwBatches, gwBatch{tenant, id, n})
	}
	batchState := func(tenant, id string) (map[string]any, error) {
		r, _ := http.NewRequest("GET", "http://"+gwAddr+"/v1/zl/batches/"+id, nil)
		r.Header.Set("X-Zerolayer-Tenant", tenant)
		resp, err := hc.Do(r)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var st map[string]any
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return st, json.NewDecoder(resp.Body).Decode(&st)
	}
	batchDone := func(st map[string]any) float64 {
		cn, _ := st["request_counts"].(map[string]any)
		var n float64
		for _, k := range []string{"completed", "failed", "canceled", "invalid"} {
			v, _ := cn[k].(float64)
			n += v
		}
		return n
	}
	postBatch("acme", "gb"+run+"a", 300)

	// recovery: how long from t0 until the Go client has finished n more
	// jobs than it had at from.
	recovered := func(t0 time.Time, base int64, n int64, limit time.Duration) string {
		for time.Since(t0) < limit {
			if completed.Load() >= base+n {
				return fmt.Sprintf("%.1fs to %d completions", time.Since(t0).Seconds(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Sprintf("NOT within %v", limit)
	}
	var faults []faultRow
	// maxGap is the longest time in [t0, t1] without a Go-client job
	// finishing.
	maxGap := func(t0, t1 time.Time) string {
		mu.Lock()
		defer mu.Unlock()
		prev, gap := t0, time.Duration(0)
		for _, at := range doneAt {
			if at.Before(t0) || at.After(t1) {
				continue
			}
			gap = max(gap, at.Sub(prev))
			prev = at
		}
		gap = max(gap, t1.Sub(prev))
		return fmt.Sprintf("longest gap without a completion %.2fs", gap.Seconds())
	}
	// flow says when, after t0, the Go client's first submit was accepted
	// and its first job finished among those it started after t0: a gap
	// with submits accepted and none finished lies between the stream and
	// the client (intake, worker, results); one without accepted submits,
	// before the stream.
	flow := func(t0 time.Time) string {
		mu.Lock()
		defer mu.Unlock()
		var acc, end time.Duration = -1, -1
		n := 0
		for _, o := range outcomes {
			if o.via != "go" || o.start.Before(t0) {
				continue
			}
			n++
			if !o.accepted.IsZero() && (acc < 0 || o.accepted.Sub(t0) < acc) {
				acc = o.accepted.Sub(t0)
			}
			if !o.end.IsZero() && (end < 0 || o.end.Sub(t0) < end) {
				end = o.end.Sub(t0)
			}
		}
		return fmt.Sprintf("of %d jobs started since: first submit accepted at %.2fs, first finished at %.2fs", n, acc.Seconds(), end.Seconds())
	}
	time.Sleep(5 * time.Second)

	// Fault 1: kill -9 a worker, and start a new one, three times.
	for k := range 3 {
		i := k % len(workers)
		fillBurst()
		t0, base := time.Now(), completed.Load()
		workers[i].signal(syscall.SIGKILL, 5*time.Second)
		time.Sleep(time.Second)
		workers[i] = startWorker(i)
		faults = append(faults, faultRow{t0, fmt.Sprintf("kill -9 worker%d (#%d)", i, k+1), "replacement started after 1s",
			recovered(t0, base, 20, 90*time.Second) + "; " + maxGap(t0, time.Now())})
		time.Sleep(4 * time.Second)
	}

	// Fault 2: shut down the ZL_JOBS stream leader, restart it after 10 s.
	{
		s, err := c.JS.Stream(ctx, contracts.StreamJobs)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leader := info.Cluster.Leader
		idx := c.NodeIndex(leader)
		fillBurst()
		t0, base := time.Now(), completed.Load()
		c.Shutdown(t, idx)
		r1 := recovered(t0, base, 20, 10*time.Second)
		if d := 10*time.Second - time.Since(t0); d > 0 {
			time.Sleep(d)
		}
		r1 += "; " + flow(t0)
		t1 := time.Now()
		c.Restart(t, idx)
		ready := time.Since(t1)
		t2, base2 := time.Now(), completed.Load()
		faults = append(faults, faultRow{t0, "NATS: ZL_JOBS leader " + leader + " down 10s", fmt.Sprintf("node back and cluster ready in %.1fs", ready.Seconds()),
			"while down: " + r1 + "; after restart: " + recovered(t2, base2, 20, 90*time.Second) + "; " + maxGap(t0, time.Now())})
		time.Sleep(4 * time.Second)
	}

	// Fault 3: restart every NATS node at once, with a runner batch
	// just started.
	{
		startRunner("rb" + run + "b")
		fillBurst()
		t0, base := time.Now(), completed.Load()
		for i := range c.Size() {
			c.Shutdown(t, i)
		}
		down := time.Now()
		w := &tb{TB: t}
		var wg sync.WaitGroup
		for i := range c.Size() {
			wg.Go(func() { c.Restart(w, i) })
		}
		wg.Wait()
		if len(w.err) > 0 {
			t.Fatalf("restart all: %v", w.err)
		}
		c.WaitReady(t)
		ready := time.Since(down)
		faults = append(faults, faultRow{t0, "NATS: all 3 nodes restarted", fmt.Sprintf("cluster ready %.1fs after the shutdown", ready.Seconds()),
			recovered(t0, base, 20, 120*time.Second) + "; " + maxGap(t0, time.Now())})
		time.Sleep(4 * time.Second)
	}

	// Fault 4: PostgreSQL stopped.
	{
		usageRows := func() int64 {
			qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
			defer qcancel()
			conn, err := pgx.Connect(qctx, dbURL)
			if err != nil {
				return -1
			}
			defer conn.Close(qctx)
			var n int64
			if err := conn.QueryRow(qctx, "SELECT count(*) FROM usage").Scan(&n); err != nil {
				return -1
			}
			return n
		}
		before := usageRows()
		t0, base := time.Now(), completed.Load()
		pgRun(t, "stop")
		down := "PostgreSQL NOT confirmed down"
		if usageRows() < 0 {
			down = "confirmed down"
		}
		r1 := recovered(t0, base, 20, pgStop)
		if d := pgStop - time.Since(t0); d > 0 {
			time.Sleep(d)
		}
		pgRun(t, "start")
		t1 := time.Now()
		var rec string
		for {
			if n := usageRows(); n > before {
				rec = fmt.Sprintf("usage rows %d→%d %.1fs after start", before, n, time.Since(t1).Seconds())
				break
			}
			if time.Since(t1) > 90*time.Second {
				rec = "usage rows NOT growing within 90s"
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		faults = append(faults, faultRow{t0, fmt.Sprintf("PostgreSQL stopped %v", pgStop), down + "; jobs while stopped: " + r1, rec})
		time.Sleep(4 * time.Second)
	}

	// Fault 5: SIGTERM the gateway mid-batch, start it again.
	{
		id := "gb" + run + "b"
		postBatch("initech", id, 1500)
		var progress float64
		for t0 := time.Now(); time.Since(t0) < 60*time.Second; time.Sleep(100 * time.Millisecond) {
			if st, err := batchState("initech", id); err == nil && batchDone(st) >= 20 {
				progress = batchDone(st)
				break
			}
		}
		t0 := time.Now()
		exited := gw.signal(syscall.SIGTERM, 15*time.Second)
		if !exited {
			gw.signal(syscall.SIGKILL, 5*time.Second)
		}
		stopped := time.Since(t0)
		startGateway() // ended by the cleanup with every process
		serves, ok := waitServes(60 * time.Second)
		rec := "gateway NOT serving within 60s"
		if ok {
			rec = fmt.Sprintf("serves %.1fs after restart", serves.Seconds())
			var cur float64
			for t1 := time.Now(); time.Since(t1) < 90*time.Second; time.Sleep(100 * time.Millisecond) {
				st, err := batchState("initech", id)
				if err != nil {
					continue
				}
				if cur = batchDone(st); cur > progress+20 || st["status"] == "ended" {
					rec += fmt.Sprintf("; batch progressing (%v→%v lines) %.1fs after SIGTERM", progress, cur, time.Since(t0).Seconds())
					break
				}
			}
		}
		faults = append(faults, faultRow{t0, "gateway SIGTERM mid-batch", fmt.Sprintf("%v of 1500 lines done; exited in %.1fs (clean=%v)", progress, stopped.Seconds(), exited), rec})
	}

	// Settle: stop the Go load, let the batches end.
	close(stopLoad)
	loadWG.Wait()
	for _, rb := range runners {
		select {
		case err := <-rb.done:
			if err != nil {
				t.Errorf("runner batch %s: %v", rb.id, err)
			}
		case <-time.After(3 * time.Minute):
			// Its lines without a record count as lost below.
			t.Errorf("runner batch %s not done in 3 minutes after the faults; stopped", rb.id)
			rb.cancel()
			<-rb.done
		}
		collectRunner(t, rb.id, rb.out, add)
	}
	// The gateway batches' outputs.
	for _, b := range gwBatches {
		ended := false
		for t0 := time.Now(); time.Since(t0) < 5*time.Minute; time.Sleep(250 * time.Millisecond) {
			if st, err := batchState(b.tenant, b.id); err == nil && st["status"] == "ended" {
				ended = true
				if e, _ := st["error"].(string); e != "" {
					t.Errorf("gateway batch %s ended with error %s", b.id, e)
				}
				break
			}
		}
		if !ended {
			t.Errorf("gateway batch %s/%s did not end", b.tenant, b.id)
		}
		seen := map[string]bool{}
		r, _ := http.NewRequest("GET", "http://"+gwAddr+"/v1/zl/batches/"+b.id+"/output", nil)
		r.Header.Set("X-Zerolayer-Tenant", b.tenant)
		if resp, err := hc.Do(r); err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rec producer.BatchRecord
				if json.Unmarshal(sc.Bytes(), &rec) != nil {
					continue
				}
				seen[rec.CustomID] = true
				o := &outcome{tenant: b.tenant, jobID: producer.BatchJobID(b.id, rec.CustomID), via: "gateway"}
				fillRecord(o, &rec)
				add(o)
			}
			resp.Body.Close()
		}
		for i := range b.n {
			if cid := fmt.Sprintf("l%04d", i); !seen[cid] {
				add(&outcome{tenant: b.tenant, jobID: producer.BatchJobID(b.id, cid), via: "gateway"})
			}
		}
	}

	// Every job's stored result.
	stored := map[string]*contracts.Result{}
	for _, o := range outcomes {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := clients[o.tenant].Result(rctx, o.jobID)
		rcancel()
		if err == nil && res != nil {
			stored[o.tenant+"/"+o.jobID] = res
		}
	}

	// Billing settles: usage rows for every stored result, or no change
	// for 15 s.
	charges := map[string]int{}
	usageDB := map[string]int{}
	readBilling := func() {
		clear(charges)
		clear(usageDB)
		qctx, qcancel := context.WithTimeout(ctx, 20*time.Second)
		defer qcancel()
		conn, err := pgx.Connect(qctx, dbURL)
		if err != nil {
			t.Logf("billing read: %v", err)
			return
		}
		defer conn.Close(qctx)
		for q, m := range map[string]map[string]int{
			"SELECT tenant_id, job_id, count(*) FROM charges GROUP BY 1, 2": charges,
			"SELECT tenant_id, job_id, count(*) FROM usage GROUP BY 1, 2":   usageDB,
		} {
			rows, err := conn.Query(qctx, q)
			if err != nil {
				t.Logf("billing read: %v", err)
				return
			}
			for rows.Next() {
				var tn, id string
				var n int
				rows.Scan(&tn, &id, &n)
				m[tn+"/"+id] = n
			}
			rows.Close()
		}
	}
	last, lastChange := -1, time.Now()
	for time.Since(lastChange) < 15*time.Second {
		readBilling()
		if len(charges) != last {
			last, lastChange = len(charges), time.Now()
		}
		if len(charges) >= len(stored) {
			break
		}
		time.Sleep(time.Second)
	}

	// ZL_USAGE records per job.
	usageMsgs := map[string]int{}
	{
		cons, err := c.JS.OrderedConsumer(ctx, contracts.StreamUsage, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.JS.Stream(ctx, contracts.StreamUsage)
		info, _ := s.Info(ctx)
		total := info.State.Msgs
		for n := uint64(0); n < total; {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for m := range batch.Messages() {
				got++
				n++
				var u struct {
					JobID  string `json:"job_id"`
					Tenant string `json:"tenant"`
				}
				json.Unmarshal(m.Data(), &u)
				tn, _ := contracts.TenantFromUsageSubject(m.Subject())
				usageMsgs[tn+"/"+u.JobID]++
			}
			if got == 0 {
				break
			}
		}
	}

	// The table.
	type tally struct{ submitted, completed, failed, billed, doubleBilled, dupUsage, lost, falselyFailed, unbilled int }
	var all tally
	per := map[string]*tally{}
	codes := map[string]int{}
	var problems []string
	for _, o := range outcomes {
		k := o.tenant + "/" + o.jobID
		tl := per[o.via]
		if tl == nil {
			tl = &tally{}
			per[o.via] = tl
		}
		for _, x := range []*tally{tl, &all} {
			x.submitted++
		}
		res := stored[k]
		inc := func(f func(*tally)) { f(tl); f(&all) }
		switch {
		case res == nil:
			inc(func(x *tally) { x.lost++ })
			problems = append(problems, fmt.Sprintf("lost: %s via %s (submitter saw %q)", k, o.via, o.seen))
		case res.Status == contracts.StatusCompleted:
			inc(func(x *tally) { x.completed++ })
		default:
			inc(func(x *tally) { x.failed++ })
			code := string(res.Status)
			if res.Error != nil {
				code += ":" + string(res.Error.Code)
			}
			codes[code]++
		}
		if o.seen != "" && o.seen != "completed" && res != nil && res.Status == contracts.StatusCompleted {
			inc(func(x *tally) { x.falselyFailed++ })
			problems = append(problems, fmt.Sprintf("falsely failed: %s via %s marked %s/%s, stored result completed", k, o.via, o.seen, o.code))
		}
		if o.seen == "" && res != nil {
			problems = append(problems, fmt.Sprintf("note: %s via %s had no answer from its submitter, stored result %s", k, o.via, res.Status))
		}
		if charges[k] > 0 {
			inc(func(x *tally) { x.billed++ })
		} else if res != nil {
			inc(func(x *tally) { x.unbilled++ })
		}
		if charges[k] > 1 || usageDB[k] > 1 {
			inc(func(x *tally) { x.doubleBilled++ })
			problems = append(problems, fmt.Sprintf("double-billed: %s charges=%d usage rows=%d", k, charges[k], usageDB[k]))
		}
		if usageMsgs[k] > 1 {
			inc(func(x *tally) { x.dupUsage++ })
			problems = append(problems, fmt.Sprintf("duplicate ZL_USAGE records: %s ×%d", k, usageMsgs[k]))
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-8s %9s %9s %6s %6s %8s %13s %13s %5s %14s\n", "via", "submitted", "completed", "failed", "billed", "unbilled", "double-billed", "dup ZL_USAGE", "lost", "falsely-failed")
	vias := []string{"go", "runner", "gateway"}
	row := func(name string, x *tally) {
		fmt.Fprintf(&sb, "%-8s %9d %9d %6d %6d %8d %13d %13d %5d %14d\n", name, x.submitted, x.completed, x.failed, x.billed, x.unbilled, x.doubleBilled, x.dupUsage, x.lost, x.falselyFailed)
	}
	for _, v := range vias {
		if x := per[v]; x != nil {
			row(v, x)
		}
	}
	row("total", &all)
	var cs []string
	for k, n := range codes {
		cs = append(cs, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(cs)
	fmt.Fprintf(&sb, "failed by code: %s\n", strings.Join(cs, ", "))
	fmt.Fprintf(&sb, "\n%-38s | %-55s | %s\n", "fault", "detail", "recovery")
	for _, f := range faults {
		fmt.Fprintf(&sb, "%-38s | %-55s | %s\n", f.name, f.detail, f.recover)
	}
	// The Go-client jobs submitted in the 2 s before each fault and not
	// finished when it began, and how long the slowest took in all.
	fmt.Fprintf(&sb, "\n%-38s | %s\n", "fault", "Go-client jobs in flight at the fault (submitted ≤2s before)")
	for _, f := range faults {
		n, unfinished := 0, 0
		var slow time.Duration
		var slowest *outcome
		for _, o := range outcomes {
			if o.via != "go" || o.start.After(f.at) || o.start.Before(f.at.Add(-2*time.Second)) || (!o.end.IsZero() && o.end.Before(f.at)) {
				continue
			}
			n++
			if o.end.IsZero() {
				unfinished++
				continue
			}
			if d := o.end.Sub(o.start); d > slow {
				slow, slowest = d, o
			}
		}
		desc := fmt.Sprintf("%d in flight, %d never answered", n, unfinished)
		if slowest != nil {
			desc += fmt.Sprintf("; slowest %s took %.2fs (%d submits, %d waits)", slowest.jobID, slow.Seconds(), slowest.submits, slowest.waits)
		}
		fmt.Fprintf(&sb, "%-38s | %s\n", f.name, desc)
	}
	fmt.Println(sb.String())
	t.Log(sb.String())
	if len(problems) > 40 {
		problems = append(problems[:40], fmt.Sprintf("… and %d more", len(problems)-40))
	}
	for _, p := range problems {
		t.Log(p)
	}
	if all.lost > 0 || all.doubleBilled > 0 || all.falselyFailed > 0 || all.dupUsage > 0 {
		t.Errorf("lost %d, double-billed %d, duplicate usage records %d, falsely failed %d: want none", all.lost, all.doubleBilled, all.dupUsage, all.falselyFailed)
	}
	if !t.Failed() {
		if conn, err := pgx.Connect(context.Background(), pgBase); err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	}
}

// fillRecord sets what a batch record said of its line.
func fillRecord(o *outcome, rec *producer.BatchRecord) {
	switch {
	case rec.Result != nil:
		o.seen = string(rec.Result.Status)
		if rec.Result.Error != nil {
			o.code = string(rec.Result.Error.Code)
		}
	case rec.Error != nil:
		o.seen, o.code = "error", string(rec.Error.Code)
	}
}

// collectRunner adds the outcomes of the runner batch id from its output.
func collectRunner(t *testing.T, id string, out *bytes.Buffer, add func(*outcome)) {
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		var rec producer.BatchRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("runner record: %v", err)
			continue
		}
		o := &outcome{tenant: "globex", jobID: producer.BatchJobID(id, rec.CustomID), via: "runner"}
		seen[rec.CustomID] = true
		fillRecord(o, &rec)
		add(o)
	}
	for i := range 400 {
		if cid := fmt.Sprintf("l%04d", i); !seen[cid] {
			add(&outcome{tenant: "globex", jobID: producer.BatchJobID(id, cid), via: "runner"})
		}
	}
}
