package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/sched"
)

const modelName = "stories260k"

func storiesPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "models", "stories260K", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared model not present: %v", err)
	}
	return p
}

// loadStories loads stories260K on a one-thread CPU backend.
func loadStories(t testing.TB) (*engine.Loaded, string) {
	t.Helper()
	be := cpu.New(cpu.Config{Threads: 1})
	t.Cleanup(func() { be.Close() })
	l, err := engine.Load(storiesPath(t), be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, be.Name()
}

// newExecutor serves stories260K one job at a time.
func newExecutor(t testing.TB) *worker.InOrderExecutor {
	t.Helper()
	l, device := loadStories(t)
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	return worker.NewInOrderExecutor(device, &worker.ServedModel{Name: modelName, Loaded: l, Engine: e})
}

type bundle struct {
	srv    *natstest.Server
	client *producer.Client
	other  *producer.Client // a second tenant
	cfg    contracts.StreamsConfig
}

// setup starts JetStream with the streams, and producers for two tenants.
func setup(t *testing.T, streams contracts.StreamsConfig) *bundle {
	t.Helper()
	srv := natstest.Run(t)
	if err := contracts.EnsureStreams(context.Background(), srv.JS, streams); err != nil {
		t.Fatal(err)
	}
	mk := func(tenant string) *producer.Client {
		c, err := producer.New(srv.Conn, producer.Config{Tenant: tenant, Models: map[string]string{modelName: storiesPath(t)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return &bundle{srv: srv, client: mk("acme"), other: mk("globex"), cfg: streams}
}

// startWorker starts a worker on its own connection.
func (b *bundle) startWorker(t *testing.T, exec worker.Executor, id string) (*worker.Worker, *nats.Conn) {
	t.Helper()
	nc, _ := b.srv.Connect(t)
	w, err := worker.New(nc, exec, worker.Config{ID: id, Streams: b.cfg, IdlePoll: 50 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w, nc
}

func request(prompt string, maxTokens int, prio contracts.Priority) *contracts.JobRequest {
	return &contracts.JobRequest{Model: modelName, Messages: []contracts.Message{{Role: "user", Content: prompt}}, MaxTokens: maxTokens, Priority: prio}
}

func wait(t *testing.T, c *producer.Client, id string) *contracts.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return r
}

// events collects a job's events up to the terminal one.
func events(t *testing.T, c *producer.Client, id string) []contracts.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, errf, err := c.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []contracts.Event
	for ev := range ch {
		out = append(out, ev)
	}
	if err := errf(); err != nil {
		t.Fatal(err)
	}
	return out
}

// streamMsgs returns the messages of a stream on a subject.
func streamMsgs(t *testing.T, js jetstream.JetStream, stream, subject string) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

// checkEvents verifies one attempt's event stream and returns the deltas'
// text of the last attempt.
func checkEvents(t *testing.T, evs []contracts.Event) (string, contracts.Event) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var text strings.Builder
	var seq uint64
	attempt := 0
	for i, ev := range evs {
		if err := ev.Validate(); err != nil {
			t.Fatalf("event %d invalid: %v", i, err)
		}
		if ev.Attempt != attempt {
			attempt, seq = ev.Attempt, 0
			text.Reset()
		}
		if ev.Seq != seq+1 {
			t.Fatalf("event %d: seq %d after %d", i, ev.Seq, seq)
		}
		seq = ev.Seq
		if ev.Type == contracts.EventDelta {
			text.WriteString(ev.Text)
		}
		if ev.Type.Terminal() != (i == len(evs)-1) {
			t.Fatalf("event %d (%s): terminal events must end the stream", i, ev.Type)
		}
	}
	return text.String(), evs[len(evs)-1]
}

func TestJobsRunEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	b.startWorker(t, newExecutor(t), "w1")
	prompts := []string{"Once upon a time", "The little dog", strings.Repeat("Tom and Sue went to the park. ", 20)}
	var ids []string
	for i := 0; i < 6; i++ {
		prio := contracts.Priorities()[i%3]
		req := request(prompts[i%3], 12+i, prio)
		req.Stream = i%2 == 0
		c := b.client
		if i%2 == 1 {
			c = b.other
		}
		id, err := c.Submit(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		c := b.client
		if i%2 == 1 {
			c = b.other
		}
		res := wait(t, c, id)
		if res.Status != contracts.StatusCompleted || res.Usage == nil || res.Usage.OutputTokens != 12+i {
			t.Fatalf("job %d: %+v", i, res)
		}
		text, final := checkEvents(t, events(t, c, id))
		if final.Type != contracts.EventFinal || text != res.Text || final.Usage.OutputTokens != res.Usage.OutputTokens {
			t.Fatalf("job %d: deltas %q, result %q, final %+v", i, text, res.Text, final)
		}
		u := res.Usage
		if u.Tenant != c.Tenant() || u.JobID != id || u.InputTokens == 0 || u.TimeToFirstTokenMs <= 0 || u.MemoryAllocatedMB <= 0 || u.Confidence <= 0 || u.Confidence > 1 || u.TraceID == "" || u.WorkerID != "w1" {
			t.Fatalf("job %d usage: %+v", i, u)
		}
		want := contracts.BucketShort
		if i%3 == 2 {
			want = contracts.BucketMedium
		}
		if u.Bucket != want || u.Priority != contracts.Priorities()[i%3] {
			t.Fatalf("job %d routed to %s/%s", i, u.Priority, u.Bucket)
		}
		if n := len(streamMsgs(t, b.srv.JS, contracts.StreamUsage, contracts.UsageSubject(c.Tenant()))); n == 0 {
			t.Fatalf("no usage record for tenant %s", c.Tenant())
		}
	}
}

func TestDuplicateSubmitRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	req := request("Once upon a time", 5, contracts.PriorityNormal)
	req.ID = "dup-job-1"
	for i := 0; i < 3; i++ {
		if id, err := b.client.Submit(context.Background(), req, nil); err != nil || id != req.ID {
			t.Fatalf("submit %d: %q %v", i, id, err)
		}
	}
	b.startWorker(t, newExecutor(t), "w1")
	res := wait(t, b.client, req.ID)
	if res.Status != contracts.StatusCompleted {
		t.Fatalf("%+v", res)
	}
	// Give a second copy, if any existed, time to run, then count.
	time.Sleep(300 * time.Millisecond)
	if n := len(streamMsgs(t, b.srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != 1 {
		t.Fatalf("%d usage records, want 1", n)
	}
	starts := 0
	for _, ev := range events(t, b.client, req.ID) {
		if ev.Type == contracts.EventStarted {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("job started %d times", starts)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	gate := &gatedExecutor{Executor: newExecutor(t), after: 3, release: make(chan struct{}), reached: make(chan struct{})}
	b.startWorker(t, gate, "w1")
	req := request("Once upon a time", 500, contracts.PriorityHigh)
	req.Stream = true
	id, err := b.client.Submit(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	if err := b.client.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the cancel message land before the next token
	close(gate.release)
	res := wait(t, b.client, id)
	if res.Status != contracts.StatusCanceled || res.Error == nil || res.Error.Code != contracts.CodeCanceled || res.Usage == nil {
		t.Fatalf("result %+v", res)
	}
	if n := res.Usage.OutputTokens; n < 3 || n > 5 {
		t.Fatalf("%d tokens billed after a cancel at token 3", n)
	}
	text, final := checkEvents(t, events(t, b.client, id))
	if final.Type != contracts.EventFinal || final.StopReason != contracts.StopCanceled || text != res.Text {
		t.Fatalf("final %+v", final)
	}
	// A job canceled while queued never runs.
	req2 := request("Once upon a time", 5, contracts.PriorityLow)
	req2.ID = "cancel-before-start"
	if err := b.client.Cancel(context.Background(), req2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Submit(context.Background(), req2, nil); err != nil {
		t.Fatal(err)
	}
	res2 := wait(t, b.client, req2.ID)
	if res2.Status != contracts.StatusCanceled || res2.Usage != nil {
		t.Fatalf("canceled-before-start result %+v", res2)
	}
}

func TestBadInputIsAnsweredNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	b.startWorker(t, newExecutor(t), "w1")
	ctx := context.Background()
	// Raw publishes, as a non-Go client would send them.
	publish := func(id string, body string) {
		m := &nats.Msg{Subject: contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "acme"), Data: []byte(body),
			Header: contracts.NewHeader(id, "acme", contracts.Traceparent{})}
		if _, err := b.srv.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish("bad-json", `{"model": "stories260k", "messages": [`)
	publish("no-messages", `{"model": "stories260k"}`)
	publish("unknown-model", `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`)
	publish("negative-max", `{"model": "stories260k", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}`)
	publish("huge-max", `{"model": "stories260k", "max_tokens": 99999999, "messages": [{"role": "user", "content": "hi"}]}`)
	long, _ := json.Marshal(strings.Repeat("dog ", 3000))
	publish("too-long", `{"model": "stories260k", "messages": [{"role": "user", "content": `+string(long)+`}]}`)
	publish("good-after", `{"model": "stories260k", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}`)
	want := map[string]contracts.Code{
		"bad-json": contracts.CodeMalformedJSON, "no-messages": contracts.CodeMissingMessages, "unknown-model": contracts.CodeUnknownModel,
		"negative-max": contracts.CodeMaxTokensOutOfRange, "huge-max": contracts.CodeMaxTokensOutOfRange, "too-long": contracts.CodePromptTooLong,
	}
	for id, code := range want {
		res := wait(t, b.client, id)
		if res.Status != contracts.StatusFailed || res.Error == nil || res.Error.Code != code {
			t.Errorf("%s: result %+v, want code %s", id, res, code)
			continue
		}
		_, last := checkEvents(t, events(t, b.client, id))
		if last.Type != contracts.EventError || last.Error.Code != code {
			t.Errorf("%s: last event %+v", id, last)
		}
	}
	dlq := streamMsgs(t, b.srv.JS, contracts.StreamDLQ, "zl.dlq.>")
	if len(dlq) != len(want) {
		t.Errorf("%d DLQ records, want %d", len(dlq), len(want))
	}
	for _, m := range dlq {
		var d contracts.DLQRecord
		if err := json.Unmarshal(m.Data(), &d); err != nil || want[d.JobID] != d.Code || len(d.RequestBytes()) == 0 {
			t.Errorf("DLQ record %s: %+v %v", m.Data(), d, err)
		}
	}
	if res := wait(t, b.client, "good-after"); res.Status != contracts.StatusCompleted {
		t.Fatalf("a good job after bad ones: %+v", res)
	}
}

// TestRedeliveryAfterCrash kills a worker mid-job (its connection closes
// without an ack); the job is redelivered to a second worker, its events
// show the new attempt, and it is billed once.
func TestRedeliveryAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{AckWait: 2 * time.Second})
	gate := &gatedExecutor{Executor: newExecutor(t), after: 2, release: make(chan struct{}), reached: make(chan struct{})}
	_, nc1 := b.startWorker(t, gate, "doomed")
	req := request("Once upon a time", 20, contracts.PriorityNormal)
	req.Stream = true
	id, err := b.client.Submit(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	nc1.Close() // the crash: no ack, no nak, no more publishes
	b.startWorker(t, newExecutor(t), "survivor")
	res := wait(t, b.client, id)
	if res.Status != contracts.StatusCompleted || res.Attempt != 2 || res.Usage.WorkerID != "survivor" {
		t.Fatalf("result %+v", res)
	}
	evs := events(t, b.client, id)
	text, final := checkEvents(t, evs)
	if final.Attempt != 2 || text != res.Text || evs[0].Attempt != 1 {
		t.Fatalf("attempts: first %d, final %d; text %q vs %q", evs[0].Attempt, final.Attempt, text, res.Text)
	}
	close(gate.release)
	if n := len(streamMsgs(t, b.srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != 1 {
		t.Fatalf("%d usage records, want 1", n)
	}
}

func TestGracefulStopHandsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	gate := &gatedExecutor{Executor: newExecutor(t), after: 2, release: make(chan struct{}), reached: make(chan struct{})}
	w1, _ := b.startWorker(t, gate, "leaving")
	id, err := b.client.Submit(context.Background(), request("Once upon a time", 10, contracts.PriorityNormal), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	t.Cleanup(func() { close(gate.release) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := w1.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil although it had to hand a job back")
	}
	b.startWorker(t, newExecutor(t), "staying")
	res := wait(t, b.client, id)
	if res.Status != contracts.StatusCompleted || res.Usage.WorkerID != "staying" || res.Usage.OutputTokens != 10 {
		t.Fatalf("result %+v", res)
	}
}

// gatedExecutor pauses a job after a number of tokens until released, so a
// test can act while the job is mid-flight. It wraps the real executor; the
// pause happens in the token callback, on the engine's decode loop.
type gatedExecutor struct {
	worker.Executor
	after   int
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gatedExecutor) Execute(ctx context.Context, job *worker.Job, sink worker.Sink) (*worker.Outcome, error) {
	n := 0
	return g.Executor.Execute(ctx, job, sinkFunc(func(text string, ids []int32, lps []contracts.TokenLogprob) {
		sink.Delta(text, ids, lps)
		if n++; n == g.after {
			g.once.Do(func() { close(g.reached) })
			select {
			case <-g.release:
			case <-ctx.Done():
			}
		}
	}))
}

// testLogger sends a worker's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type sinkFunc func(string, []int32, []contracts.TokenLogprob)

func (f sinkFunc) Delta(text string, ids []int32, lps []contracts.TokenLogprob) { f(text, ids, lps) }

func (f sinkFunc) Event(kind, detail string) {}

func (f sinkFunc) Tool(string, contracts.ToolAction, string) {}

// newSchedExecutor serves stories260K through a scheduler.
func newSchedExecutor(t testing.TB, cfg sched.Config) *worker.SchedExecutor {
	t.Helper()
	l, device := loadStories(t)
	s, err := sched.New(l.Model, l.Tokenizer, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return worker.NewSchedExecutor(device, contracts.Buckets{}, &worker.ScheduledModel{Name: modelName, Loaded: l, Scheduler: s})
}

// TestSchedulerExecutor runs concurrent jobs through the scheduler and
// checks each output against the same job run alone, in order.
func TestSchedulerExecutor(t *testing.T) {
	t.Parallel()
	b := setup(t, contracts.StreamsConfig{})
	nc, _ := b.srv.Connect(t)
	w, err := worker.New(nc, newSchedExecutor(t, sched.Config{KVBlocks: 40, MaxBatchTokens: 32}),
		worker.Config{ID: "sched", Concurrency: 16, Streams: b.cfg, IdlePoll: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	prompts := []string{"Once upon a time", "The little dog", "Tom and Sue", strings.Repeat("Lily saw a big red ball. ", 10)}
	var ids []string
	for i := 0; i < 12; i++ {
		req := request(prompts[i%4], 30+10*(i%5), contracts.Priorities()[i%3])
		id, err := b.client.Submit(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	inorder := newExecutor(t)
	for i, id := range ids {
		res := wait(t, b.client, id)
		if res.Status != contracts.StatusCompleted {
			t.Fatalf("job %d: %+v", i, res)
		}
		text, _ := checkEvents(t, events(t, b.client, id))
		if text != res.Text {
			t.Fatalf("job %d: deltas %q vs result %q", i, text, res.Text)
		}
		want, err := inorder.Execute(context.Background(), &worker.Job{Request: request(prompts[i%4], 30+10*(i%5), contracts.PriorityNormal)}, sinkFunc(func(string, []int32, []contracts.TokenLogprob) {}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != want.Text {
			t.Errorf("job %d through the scheduler: %q\nalone: %q", i, res.Text, want.Text)
		}
	}
}
