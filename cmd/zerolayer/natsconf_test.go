package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
)

// shippedNATS runs a nats-server from ops/nats/nats.conf (port,
// monitoring and store moved aside, a random password for each user) and
// returns a connect func for its users. A trusted role (worker, billing,
// gateway) that needs a subject its permissions do not grant fails the
// test.
func shippedNATS(t *testing.T) (*natstest.Shipped, func(user string) *nats.Conn) {
	t.Helper()
	s := natstest.RunShipped(t, filepath.Join("..", "..", "ops", "nats", "nats.conf"), "worker", "billing", "gateway")
	return s, func(user string) *nats.Conn { return s.Connect(t, user) }
}

// TestDockerComposeUsesShippedNATSConfig: the compose file runs NATS from
// ops/nats/nats.conf and gives it every password the config names, so the
// tests on the shipped config are tests of the compose deployment too.
func TestDockerComposeUsesShippedNATSConfig(t *testing.T) {
	compose := readFile(t, filepath.Join("..", "..", "docker-compose.yml"))
	conf := readFile(t, filepath.Join("..", "..", "ops", "nats", "nats.conf"))
	if !strings.Contains(compose, "./ops/nats/nats.conf:/etc/nats/nats.conf") {
		t.Error("docker-compose.yml does not mount ops/nats/nats.conf")
	}
	for _, f := range strings.Fields(strings.NewReplacer(",", " ", "}", " ", "{", " ").Replace(conf)) {
		if v, ok := strings.CutPrefix(f, "$ZL_"); ok && !strings.Contains(compose, "ZL_"+v+": ${ZL_"+v) {
			t.Errorf("nats.conf uses $ZL_%s, which docker-compose.yml does not pass to nats", v)
		}
	}
	if strings.Contains(compose, `"8222:8222"`) {
		t.Error("docker-compose.yml publishes the NATS monitoring port, which lists every connection's subscriptions, to every network")
	}
}

// TestNATSConfigPermissions checks each role of the shipped config can do
// its work: the worker provisions the streams; the gateway creates its
// batch buckets, submits for any tenant, stores a batch and looks results
// up; a tenant, from its own account, submits, looks up, waits for and
// cancels its jobs with the Go client and follows their events.
func TestNATSConfigPermissions(t *testing.T) {
	_, connect := shippedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wnc := connect("worker")
	wjs, _ := jetstream.New(wnc)
	if err := contracts.EnsureStreams(ctx, wjs, contracts.StreamsConfig{}); err != nil {
		t.Fatalf("the worker provisions the streams: %v", err)
	}

	keys, err := gateway.NewKeyring(gateway.KeyringConfig{Keys: map[string]string{"k-globex": "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(connect("gateway"), gateway.Config{Keys: keys})
	if err != nil {
		t.Fatalf("the gateway starts (and creates its buckets): %v", err)
	}
	defer gw.Close()
	hs := httptest.NewServer(gw)
	defer hs.Close()
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, strings.NewReader(body))
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
	if code, body := call("POST", "/v1/jobs", job); code != 202 {
		t.Fatalf("the gateway submits for globex: %d %s", code, body)
	}
	if code, body := call("POST", "/v1/batches?id=b1", `{"custom_id":"a","request":`+job+`}`+"\n"); code != 202 {
		t.Fatalf("the gateway stores a batch: %d %s", code, body)
	}
	// (The job was never submitted: the look-up, allowed, answers 404.)
	if code, body := call("GET", "/v1/jobs/some-job", ""); code != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Fatalf("the gateway looks a result up: %d %s", code, body)
	}
	if code, body := call("POST", "/v1/jobs/some-job/cancel", ""); code != 202 {
		t.Fatalf("the gateway cancels for globex: %d %s", code, body)
	}

	// The Go client, from acme's own account.
	pc, err := producer.New(connect("acme"), producer.Config{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	req := &contracts.JobRequest{Model: "m", MaxTokens: 4, Messages: []contracts.Message{{Role: "user", Content: "hi"}}}
	id, err := pc.Submit(ctx, req, nil)
	if err != nil {
		t.Fatalf("acme submits with the Go client: %v", err)
	}
	req.ID = id
	if again, err := pc.Submit(ctx, req, nil); err != nil || again != id {
		t.Fatalf("acme resubmits its queued job: %q, %v; want the same id, no error", again, err)
	}
	if res, err := pc.Result(ctx, id); !errors.Is(err, producer.ErrPending) || res != nil {
		t.Fatalf("acme looks its (pending) result up: %v %v", res, err)
	}
	if err := pc.Cancel(ctx, id); err != nil {
		t.Fatalf("acme cancels its job: %v", err)
	}
	// A worker's answer reaches acme's waits and events.
	evs, evErr, err := pc.Events(ctx, id)
	if err != nil {
		t.Fatalf("acme follows its job's events: %v", err)
	}
	waited := make(chan *contracts.Result, 1)
	go func() {
		res, err := pc.Wait(ctx, id)
		if err != nil {
			t.Error(err)
		}
		waited <- res
	}()
	publishAs(t, wjs, contracts.EventsSubject("acme", id), contracts.Event{JobID: id, Tenant: "acme", Type: contracts.EventFinal, Seq: 1, Attempt: 1, Text: "done"})
	publishAs(t, wjs, contracts.ResultsSubject("acme", id), contracts.Result{JobID: id, Tenant: "acme", Status: contracts.StatusCompleted, Text: "done", Attempt: 1})
	if res := <-waited; res == nil || res.Text != "done" {
		t.Fatalf("acme's Wait: %+v", res)
	}
	var got []contracts.Event
	for ev := range evs {
		got = append(got, ev)
	}
	if err := evErr(); err != nil || len(got) != 1 || got[0].Text != "done" {
		t.Fatalf("acme's events: %+v, %v", got, err)
	}
	if res, err := pc.Result(ctx, id); err != nil || res == nil || res.Text != "done" {
		t.Fatalf("acme looks its result up: %+v, %v", res, err)
	}
}

// publishAs publishes v as JSON on subject and waits for the stream's ack.
func publishAs(t *testing.T, js jetstream.JetStream, subject string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := js.Publish(t.Context(), subject, b); err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
}

// TestHostileTenant runs the shipped config and tries, as tenant acme with
// the credentials it gives a tenant, every way found to read, cancel or
// stall tenant globex's jobs, or to see anything of it. Each try has a
// positive control (acme doing the same to itself works, or the operator
// sees the thing exists), so a refusal is not an artefact of the test.
func TestHostileTenant(t *testing.T) {
	_, connect := shippedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := connect("operator")
	ojs, _ := jetstream.New(op)
	if err := contracts.EnsureStreams(ctx, ojs, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	// Watch what workers would hear: cancels, stored-job notices.
	opCancels, _ := op.SubscribeSync(contracts.SubjectCancelAll)
	op.Flush()

	// globex has a queued job and a finished one; their ids are known to
	// acme (batch ids are guessable).
	gc, err := producer.New(connect("globex"), producer.Config{Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	job := func(id string) *contracts.JobRequest {
		return &contracts.JobRequest{ID: id, Model: "m", MaxTokens: 4, Messages: []contracts.Message{{Role: "user", Content: "globex's secret prompt"}}}
	}
	if _, err := gc.Submit(ctx, job("BATCH1-queued"), nil); err != nil {
		t.Fatal(err)
	}
	publishAs(t, ojs, contracts.ResultsSubject("globex", "BATCH1-done"), contracts.Result{JobID: "BATCH1-done", Tenant: "globex", Status: contracts.StatusCompleted, Text: "globex's secret output"})
	publishAs(t, ojs, contracts.EventsSubject("globex", "BATCH1-done"), contracts.Event{JobID: "BATCH1-done", Tenant: "globex", Type: contracts.EventFinal, Text: "globex's secret output"})
	publishAs(t, ojs, contracts.DLQSubject(contracts.PriorityNormal, contracts.BucketShort, "globex"), contracts.DLQRecord{JobID: "BATCH1-bad", Tenant: "globex"})
	publishAs(t, ojs, contracts.UsageSubject("globex"), map[string]string{"job_id": "BATCH1-done"})

	acme := connect("acme")
	ajs, _ := jetstream.New(acme)
	// Everything acme's account can hear, from here on.
	heard, _ := acme.SubscribeSync(">")
	acme.Flush()
	secret := "globex's secret"

	// acme's own subscription to ">" hears its requests too, so a request
	// nobody else answers times out instead of getting "no responders".
	request := func(subject, body string) (*nats.Msg, error) {
		return acme.Request(subject, []byte(body), 500*time.Millisecond)
	}
	publish := func(m *nats.Msg) error {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := ajs.PublishMsg(pctx, m)
		return err
	}
	refused := func(name string, m *nats.Msg, err error) {
		t.Helper()
		switch {
		case err != nil:
			t.Logf("refused: %s: %v", name, err)
		case m.Header.Get("Status") != "" && m.Header.Get("Status") != "200":
			t.Logf("refused: %s: status %s", name, m.Header.Get("Status"))
		case strings.Contains(string(m.Data), `"error"`) && !strings.Contains(string(m.Data), secret):
			t.Logf("refused: %s: %s", name, m.Data)
		default:
			t.Errorf("ESCAPE: %s: answered %q %v", name, m.Data, m.Header)
		}
	}
	// Positive controls: acme's own direct gets and submits work.
	publishAs(t, ojs, contracts.ResultsSubject("acme", "BATCH1-done"), contracts.Result{JobID: "BATCH1-done", Tenant: "acme", Status: contracts.StatusCompleted, Text: "acme's"})
	if m, err := contracts.LastMsg(ctx, acme, contracts.StreamResults, contracts.ResultsSubject("acme", "BATCH1-done")); err != nil || m == nil || !strings.Contains(string(m.Data), "acme's") {
		t.Fatalf("control: acme reads its own result: %v %v", m, err)
	}

	// 1. Another tenant's results, events, usage, dead letters and queued
	// prompts through the JetStream API.
	for _, tc := range []struct{ name, subject, body string }{
		{"STREAM.MSG.GET last_by_subj on ZL_RESULTS", "$JS.API.STREAM.MSG.GET.ZL_RESULTS", `{"last_by_subj":"zl.results.globex.BATCH1-done"}`},
		{"STREAM.MSG.GET seq 1 on ZL_JOBS (a queued prompt)", "$JS.API.STREAM.MSG.GET.ZL_JOBS", `{"seq":1}`},
		{"STREAM.MSG.GET on ZL_DLQ", "$JS.API.STREAM.MSG.GET.ZL_DLQ", `{"seq":1}`},
		{"STREAM.MSG.GET on ZL_USAGE", "$JS.API.STREAM.MSG.GET.ZL_USAGE", `{"seq":1}`},
		{"direct get of globex's result", "$JS.API.DIRECT.GET.ZL_RESULTS.zl.results.globex.BATCH1-done", ""},
		{"direct get of globex's last event", "$JS.API.DIRECT.GET.ZL_EVENTS.zl.events.globex.BATCH1-done", ""},
		{"direct get by sequence on ZL_RESULTS", "$JS.API.DIRECT.GET.ZL_RESULTS", `{"seq":1}`},
		{"direct get next_by_subj on ZL_RESULTS", "$JS.API.DIRECT.GET.ZL_RESULTS", `{"seq":1,"next_by_subj":"zl.results.>"}`},
		{"direct get of a result stored in the old form", "$JS.API.DIRECT.GET.ZL_RESULTS.zl.results.BATCH1-done", ""},
		{"STREAM.INFO of ZL_JOBS with a subjects filter (tenants and job ids)", "$JS.API.STREAM.INFO.ZL_JOBS", `{"subjects_filter":">"}`},
		{"STREAM.INFO of ZL_RESULTS with a subjects filter", "$JS.API.STREAM.INFO.ZL_RESULTS", `{"subjects_filter":">"}`},
		{"STREAM.LIST", "$JS.API.STREAM.LIST", ""},
		{"ACCOUNT.INFO", "$JS.API.INFO", ""},
		// 2. A consumer of its own over everyone's results.
		{"CONSUMER.CREATE on ZL_RESULTS filtered on zl.results.>", "$JS.API.CONSUMER.CREATE.ZL_RESULTS.spy.zl.results.>",
			`{"stream_name":"ZL_RESULTS","config":{"name":"spy","filter_subject":"zl.results.>","ack_policy":"none"}}`},
		{"CONSUMER.CREATE on ZL_JOBS (steal jobs)", "$JS.API.CONSUMER.CREATE.ZL_JOBS.thief",
			`{"stream_name":"ZL_JOBS","config":{"name":"thief","ack_policy":"explicit"}}`},
		{"CONSUMER.MSG.NEXT on the workers' consumer", "$JS.API.CONSUMER.MSG.NEXT.ZL_JOBS.jobs-normal-short", `{"batch":1,"no_wait":true}`},
		// 3. The workers' consumers.
		{"CONSUMER.DELETE of the workers' consumer", "$JS.API.CONSUMER.DELETE.ZL_JOBS.jobs-normal-short", ""},
		{"STREAM.PURGE of ZL_JOBS", "$JS.API.STREAM.PURGE.ZL_JOBS", ""},
		{"STREAM.DELETE of ZL_CANCEL", "$JS.API.STREAM.DELETE.ZL_CANCEL", ""},
	} {
		m, err := request(tc.subject, tc.body)
		refused(tc.name, m, err)
	}
	// The system account's connection list answers an account with its
	// own connections only.
	if m, err := request("$SYS.REQ.SERVER.PING.CONNZ", `{"subscriptions":true}`); err == nil {
		for _, leak := range []string{"globex", "zl.cancel", "zl.stored", "zl.results.*"} {
			if strings.Contains(string(m.Data), leak) {
				t.Errorf("ESCAPE: $SYS CONNZ shows acme %q: %s", leak, m.Data)
			}
		}
	}
	if _, err := ojs.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(contracts.PriorityNormal, contracts.BucketShort)); err != nil {
		t.Errorf("the workers' consumer after acme tried to delete it: %v", err)
	}

	// 4. Cancel globex's job: on globex's subject, in the old KV bucket,
	// and with a roll-up that would purge every cancel request.
	for _, subject := range []string{contracts.CancelSubject("globex", "BATCH1-queued"), "$KV.ZL_CANCEL.BATCH1-queued", "$KV.ZL_CANCEL.globex.BATCH1-queued", "zl.cancel.BATCH1-queued"} {
		refused("cancel via "+subject, nil, publish(nats.NewMsg(subject)))
	}
	if m, err := contracts.LastMsg(ctx, op, contracts.StreamCancel, contracts.CancelSubject("globex", "BATCH1-queued")); err != nil || m != nil {
		t.Errorf("ESCAPE: a cancel request for globex's job is stored: %v %v", m, err)
	}
	roll := nats.NewMsg(contracts.CancelSubject("acme", "x"))
	roll.Header.Set("Nats-Rollup", "all")
	refused("roll-up of ZL_CANCEL", nil, publish(roll))
	// acme's cancel of the same id names acme's job only.
	if err := producerFor(t, acme, "acme").Cancel(ctx, "BATCH1-queued"); err != nil {
		t.Fatalf("control: acme cancels its own BATCH1-queued: %v", err)
	}
	for {
		m, err := opCancels.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		if !strings.HasPrefix(m.Subject, "zl.cancel.acme.") {
			t.Errorf("ESCAPE: workers heard %s from acme", m.Subject)
		}
	}

	// 5. Stall globex: its job ids in acme's subjects, a forged
	// Nats-Msg-Id equal to globex's next ids, and jobs on classes no
	// consumer serves or on globex's subjects.
	for i, forged := range []string{"BATCH1-next", "globex/BATCH1-next", "globex.BATCH1-next"} {
		m := nats.NewMsg(contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "acme", "m", fmt.Sprint("forge-", i)))
		m.Data = []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		m.Header.Set(contracts.HeaderMsgID, forged)
		if err := publish(m); err != nil {
			t.Fatalf("control: acme submits its own job: %v", err)
		}
	}
	if _, err := gc.Submit(ctx, job("BATCH1-next"), nil); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "globex", "m", "BATCH1-next2"),
		contracts.ModellessJobSubject(contracts.PriorityNormal, contracts.BucketShort, "globex", "BATCH1-next3"),
		"zl.jobs.urgent.short.acme.x", "zl.jobs.normal.tiny.acme.x", "zl.jobs.normal.short.acme", "zl.jobs.normal.short.acme.x.y.z"} {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{}`)
		refused("job on "+subject, nil, publish(m))
	}
	s, err := ojs.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("zl.jobs.>"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"zl.jobs.normal.short.globex.m.BATCH1-queued", "zl.jobs.normal.short.globex.m.BATCH1-next"} {
		if info.State.Subjects[want] != 1 {
			t.Errorf("ESCAPE: %s not queued once after acme's tries: %v", want, info.State.Subjects)
		}
	}
	if len(info.State.Subjects) != 5 {
		t.Errorf("ZL_JOBS holds %v; want globex's 2 and acme's 3", info.State.Subjects)
	}

	// 6. Listen: acme's account heard its own publishes and nothing of
	// globex's.
	for {
		m, err := heard.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		if strings.Contains(string(m.Data), secret) || strings.HasPrefix(m.Subject, "zl.results.globex.") || strings.HasPrefix(m.Subject, "zl.events.globex.") {
			t.Errorf("ESCAPE: acme heard %s: %q", m.Subject, m.Data)
		}
	}
	// Replies ZEROLAYER's users get on their inboxes (the gateway's look-up
	// of globex's result) and live results and events of globex reach no
	// subscriber in acme's account, _INBOX.> and > included.
	inbox, _ := acme.SubscribeSync("_INBOX.>")
	acme.Flush()
	gwc := producerFor(t, connect("gateway"), "globex")
	if res, err := gwc.Result(ctx, "BATCH1-done"); err != nil || res == nil {
		t.Fatalf("control: the gateway reads globex's result: %v %v", res, err)
	}
	publishAs(t, ojs, contracts.ResultsSubject("globex", "BATCH1-live"), contracts.Result{JobID: "BATCH1-live", Tenant: "globex", Text: secret})
	publishAs(t, ojs, contracts.EventsSubject("globex", "BATCH1-live"), contracts.Event{JobID: "BATCH1-live", Tenant: "globex", Text: secret})
	for _, sub := range []*nats.Subscription{inbox, heard} {
		if m, err := sub.NextMsg(500 * time.Millisecond); err == nil {
			t.Errorf("ESCAPE: acme's %s heard %s: %q", sub.Subject, m.Subject, m.Data)
		}
	}
	// The Go client as acme, asking for globex's ids, gets acme's jobs
	// of those ids (none), never globex's: pending, as far as acme's
	// account (which cannot see the queue) can tell.
	ac := producerFor(t, acme, "acme")
	if res, err := ac.Result(ctx, "BATCH1-live"); !errors.Is(err, producer.ErrPending) || res != nil {
		t.Errorf("acme's Result(BATCH1-live) = %+v, %v; want none (it is globex's)", res, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer wcancel()
	if res, err := ac.Wait(wctx, "BATCH1-live"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acme's Wait(BATCH1-live) = %+v, %v; want to wait (it is globex's)", res, err)
	}
}

// producerFor returns a Go client for tenant on nc, closed at cleanup.
func producerFor(t *testing.T, nc *nats.Conn, tenant string) *producer.Client {
	t.Helper()
	c, err := producer.New(nc, producer.Config{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShippedConfigAtUserSizes runs the gateway's file and batch work on
// the shipped config at the sizes users bring: a batch input of several
// megabytes uploaded, read back whole, and turned into a batch (the
// gateway reads it from the object store), and a batch listed (a watch of
// its key-value bucket). The object store's reader and the key-value
// watches are JetStream push consumers with flow control: a role not
// granted $JS.FC on their streams stalls after about 2 MiB, and
// shippedNATS fails the test on the server's permission violation.
func TestShippedConfigAtUserSizes(t *testing.T) {
	s, connect := shippedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wjs, _ := jetstream.New(connect("worker"))
	if err := contracts.EnsureStreams(ctx, wjs, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	keys, err := gateway.NewKeyring(gateway.KeyringConfig{Keys: map[string]string{"k-globex": "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(connect("gateway"), gateway.Config{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	hs := httptest.NewServer(gw)
	defer hs.Close()

	// 6 MB of batch lines, each a valid request.
	var in strings.Builder
	for i := 0; in.Len() < 6<<20; i++ {
		fmt.Fprintf(&in, `{"custom_id":"r%05d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":4,"messages":[{"role":"user","content":%q}]}}`+"\n",
			i, strings.Repeat("lorem ipsum ", 100))
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	io.WriteString(fw, in.String())
	mw.Close()
	do := func(method, path, contentType string, body io.Reader) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, body)
		req.Header.Set("Authorization", "Bearer k-globex")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the body: %v %q", method, path, err, s.Violations())
		}
		return resp, b
	}
	resp, body := do("POST", "/v1/files", mw.FormDataContentType(), &form)
	if resp.StatusCode != 200 {
		t.Fatalf("upload of %d bytes: %d %s", in.Len(), resp.StatusCode, body)
	}
	var file struct{ ID string }
	json.Unmarshal(body, &file)
	resp, body = do("GET", "/v1/files/"+file.ID+"/content", "", nil)
	if resp.StatusCode != 200 || string(body) != in.String() {
		t.Fatalf("download: %d, %d of %d bytes, equal %v", resp.StatusCode, len(body), in.Len(), string(body) == in.String())
	}
	resp, body = do("POST", "/v1/batches", "application/json", strings.NewReader(`{"input_file_id":"`+file.ID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("a batch from the %d-byte file: %d %s", in.Len(), resp.StatusCode, body)
	}
	if resp, body = do("GET", "/v1/batches", "", nil); resp.StatusCode != 200 || !strings.Contains(string(body), file.ID) {
		t.Fatalf("list batches: %d %s", resp.StatusCode, body)
	}
	if v := s.Violations(); len(v) > 0 {
		t.Errorf("permission violations: %q", v)
	}
}
