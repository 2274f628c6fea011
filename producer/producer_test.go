package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

func setup(t *testing.T) (*natstest.Server, *producer.Client) {
	t.Helper()
	srv := natstest.Run(t)
	if err := contracts.EnsureStreams(context.Background(), srv.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	models := map[string]string{}
	if p := filepath.Join("..", "..", "shared", "models", "stories260K", "stories260K.gguf"); fileExists(p) {
		models["stories260k"] = p
	}
	c, err := producer.New(srv.Conn, producer.Config{Tenant: "acme", Models: models})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestNewRejectsBadTenant(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	for _, tenant := range []string{"", "a.b", "a b", "*", strings.Repeat("x", 65)} {
		if _, err := producer.New(srv.Conn, producer.Config{Tenant: tenant}); err == nil {
			t.Errorf("tenant %q accepted", tenant)
		}
	}
}

// TestSubmitRoutes checks ids, subjects (priority, bucket by token count,
// tenant) and headers of submitted jobs.
func TestSubmitRoutes(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	if !fileExists(filepath.Join("..", "..", "shared", "models", "stories260K", "stories260K.gguf")) {
		t.Skip("shared model not present")
	}
	ctx := context.Background()
	cases := []struct {
		prompt string
		prio   contracts.Priority
		want   string
	}{
		{"Once upon a time", contracts.PriorityHigh, "zl.jobs.high.short.acme.stories260k."},
		{strings.Repeat("The dog ran. ", 20), "", "zl.jobs.normal.medium.acme.stories260k."},
		{strings.Repeat("The dog ran to the big red ball in the park. ", 60), contracts.PriorityLow, "zl.jobs.low.long.acme.stories260k."},
	}
	for _, tc := range cases {
		req := &contracts.JobRequest{Model: "stories260k", Priority: tc.prio, Messages: []contracts.Message{{Role: "user", Content: tc.prompt}}}
		id, err := c.Submit(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if contracts.ValidateJobID(id) != nil || req.ID != "" {
			t.Fatalf("id %q (the caller's request must not be modified: %q)", id, req.ID)
		}
		m, err := srv.JS.Stream(ctx, contracts.StreamJobs)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := m.GetLastMsgForSubject(ctx, tc.want+id)
		if err != nil {
			t.Fatalf("%q: nothing on %s: %v", tc.prompt[:10], tc.want+id, err)
		}
		if raw.Header.Get(contracts.HeaderTenant) != "acme" || raw.Header.Get(contracts.HeaderTraceparent) == "" {
			t.Errorf("headers %v", raw.Header)
		}
	}
}

func TestSubmitIsIdempotentAndValidates(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	req := &contracts.JobRequest{ID: "same-id", Model: "other-model", Messages: []contracts.Message{{Role: "user", Content: "hi"}}}
	for i := 0; i < 3; i++ {
		if id, err := c.Submit(ctx, req, nil); err != nil || id != "same-id" {
			t.Fatalf("%q %v", id, err)
		}
	}
	info, err := srv.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := info.Info(ctx)
	if st.State.Msgs != 1 {
		t.Fatalf("%d jobs stored for one id", st.State.Msgs)
	}
	_, err = c.Submit(ctx, &contracts.JobRequest{Model: "m"}, nil)
	var ve *contracts.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, contracts.CodeMissingMessages) {
		t.Fatalf("no messages: %v", err)
	}
	// A prompt whose length alone cannot fit the model's context is
	// refused at submit, before it is tokenized, and never queued.
	if !fileExists(filepath.Join("..", "..", "shared", "models", "stories260K", "stories260K.gguf")) {
		t.Skip("shared model not present")
	}
	huge := &contracts.JobRequest{Model: "stories260k", Messages: []contracts.Message{{Role: "user", Content: strings.Repeat("dog ", 200_000)}}}
	if _, err := c.Submit(ctx, huge, nil); !errors.Is(err, contracts.CodePromptTooLong) {
		t.Fatalf("an 800 KB prompt: %v, want prompt_too_long", err)
	}
	// One whose bytes could fit but whose tokens do not (stories260K's
	// context is 2,048 tokens) is refused once tokenized, as the worker
	// would refuse it (issue 37).
	long := &contracts.JobRequest{Model: "stories260k", Messages: []contracts.Message{{Role: "user", Content: strings.Repeat("dog ", 2000)}}}
	n, err := c.PromptTokens(long)
	if err != nil || n < 2048 {
		t.Fatalf("the long prompt: %d tokens (%v), want at least the context's 2,048", n, err)
	}
	if _, err := c.Submit(ctx, long, nil); !errors.Is(err, contracts.CodePromptTooLong) {
		t.Fatalf("a prompt of %d tokens: %v, want prompt_too_long", n, err)
	}
	if st, _ := info.Info(ctx); st.State.Msgs != 1 {
		t.Fatalf("%d jobs stored after a refused one", st.State.Msgs)
	}
}

// TestSubmitServedOnly: a client told its models are the served ones
// refuses a request for another model at Submit (unknown_model) and
// queues nothing; without ServedOnly the same request is queued.
func TestSubmitServedOnly(t *testing.T) {
	t.Parallel()
	srv, loose := setup(t)
	ctx := context.Background()
	strict, err := producer.New(srv.Conn, producer.Config{Tenant: "acme", Models: map[string]string{"served": "/nonexistent.gguf"}, ServedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	req := &contracts.JobRequest{Model: "elsewhere", Messages: []contracts.Message{{Role: "user", Content: "hi"}}}
	if _, err := strict.Submit(ctx, req, nil); !errors.Is(err, contracts.CodeUnknownModel) {
		t.Fatalf("a model not served: %v", err)
	}
	info, err := srv.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := info.Info(ctx); st.State.Msgs != 0 {
		t.Fatalf("%d jobs queued after a refused one", st.State.Msgs)
	}
	if _, err := loose.Submit(ctx, req, nil); err != nil {
		t.Fatalf("without ServedOnly: %v", err)
	}
}

func TestCancelAndWait(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	sub, err := srv.Conn.SubscribeSync(contracts.SubjectCancelAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, "job-1"); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(2 * time.Second); err != nil || m.Subject != "zl.cancel.acme.job-1" {
		t.Fatalf("cancel message: %v, %v", m, err)
	}
	if m, err := contracts.LastMsg(ctx, srv.Conn, contracts.StreamCancel, contracts.CancelSubject("acme", "job-1")); err != nil || m == nil {
		t.Fatalf("no stored cancel request: %v, %v", m, err)
	}
	// Wait returns a result published after it started waiting.
	done := make(chan *contracts.Result)
	go func() {
		r, err := c.Wait(ctx, "job-2")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// Publish once Wait is subscribed to the tenant's results (the
	// server then counts an interest in them): the result then comes
	// after Wait started waiting, and is not found by its first look-up.
	natstest.Until(t, 10*time.Second, "Wait's subscription to acme's results", func() bool {
		return srv.Server.NumSubscriptions() > 0 && c.Waiting() == 1
	})
	res := contracts.Result{JobID: "job-2", Tenant: "acme", Status: contracts.StatusCompleted, StopReason: contracts.StopEndTurn, Attempt: 1, FinishedAt: time.Now()}
	b, _ := json.Marshal(res)
	// Another tenant's job-2 first: not acme's.
	other := res
	other.Tenant, other.Text = "beta", "beta's"
	ob, _ := json.Marshal(other)
	if _, err := srv.JS.PublishMsg(ctx, &nats.Msg{Subject: contracts.ResultsSubject("beta", "job-2"), Data: ob}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.JS.PublishMsg(ctx, &nats.Msg{Subject: contracts.ResultsSubject("acme", "job-2"), Data: b}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r == nil || r.JobID != "job-2" || r.Status != contracts.StatusCompleted || r.Tenant != "acme" {
		t.Fatalf("result %+v", r)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a job that never ends: %v", err)
	}
}

// TestWaitSeesResultCarriedBeforeItBegan: the server hands a result to
// subscribers a moment before the stream stores it. A Wait that begins in
// that moment finds it neither stored nor coming; the client's results
// subscription kept it, so Wait returns it at once instead of at its
// 2 s recheck. The stream here refuses the message for good (a wrong
// Nats-Expected-Stream), which makes the moment last.
func TestWaitSeesResultCarriedBeforeItBegan(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	c.Wait(wctx, "warm-up") // subscribes the client to acme's results
	cancel()
	res := contracts.Result{JobID: "job-3", Tenant: "acme", Status: contracts.StatusCompleted, StopReason: contracts.StopEndTurn, Attempt: 1, FinishedAt: time.Now()}
	b, _ := json.Marshal(res)
	m := nats.NewMsg(contracts.ResultsSubject("acme", "job-3"))
	m.Data = b
	m.Header.Set("Nats-Expected-Stream", "not-"+contracts.StreamResults)
	if err := srv.Conn.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 10*time.Second, "the client carrying job-3's result", func() bool { return c.Kept("job-3") })
	if stored, err := contracts.LastMsg(ctx, srv.Conn, contracts.StreamResults, contracts.ResultsSubject("acme", "job-3")); err != nil || stored != nil {
		t.Fatalf("the stream stored the result after all: %v %v", stored, err)
	}
	wctx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := c.Wait(wctx, "job-3")
	if err != nil || r.JobID != "job-3" || r.Status != contracts.StatusCompleted {
		t.Fatalf("Wait for a result carried before it began: %+v, %v", r, err)
	}
}

// TestResultSaysPendingOrNotFound: Result never answers nil, nil: a
// queued job is ErrPending, an id never submitted is not_found, a finished
// job is its result.
func TestResultSaysPendingOrNotFound(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := context.Background()
	if r, err := c.Result(ctx, "never-submitted"); r != nil || !errors.Is(err, contracts.CodeNotFound) {
		t.Fatalf("an id never submitted: %+v, %v", r, err)
	}
	id, err := c.Submit(ctx, &contracts.JobRequest{Model: "stories260k", Messages: []contracts.Message{{Role: "user", Content: "hi"}}, MaxTokens: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Result(ctx, id); r != nil || !errors.Is(err, producer.ErrPending) {
		t.Fatalf("a queued job: %+v, %v", r, err)
	}
}

// TestPromptTokensWithoutToolBlocks: inline <tool> blocks are not prompt
// text (the worker takes them out before it tokenizes), so they do not
// count towards the bucket; a malformed block is refused at submit.
func TestPromptTokensWithoutToolBlocks(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	msgs := []contracts.Message{{Role: "user", Content: "Once upon a time"}}
	block := `<tool name="json_validator"><param name="schema">{"type": "object", "description": "` + strings.Repeat("long ", 400) + `"}</param></tool>`
	for _, model := range []string{"stories260k", "not-configured"} {
		plain, err := c.PromptTokens(&contracts.JobRequest{Model: model, System: "Be brief.", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		with, err := c.PromptTokens(&contracts.JobRequest{Model: model, System: "Be brief." + block, Messages: msgs})
		if err != nil || with != plain {
			t.Errorf("%s: %d tokens with a tool block, %d without (%v)", model, with, plain, err)
		}
	}
	_, err := c.Submit(context.Background(), &contracts.JobRequest{Model: "stories260k", System: `<tool name="nope"></tool>`, Messages: msgs}, nil)
	if !errors.Is(err, contracts.CodeUnknownTool) {
		t.Errorf("unknown inline tool at submit: %v", err)
	}
}

// TestSubmitMany submits 1,200 jobs (more than one chunk) in one call, with
// a request the contract refuses and a repeated id among them: each gets
// its own answer, and the stream holds every good job once.
func TestSubmitMany(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	const n = 1200
	var reqs []*contracts.JobRequest
	for i := range n {
		reqs = append(reqs, &contracts.JobRequest{ID: fmt.Sprintf("job-%04d", i), Model: "m", MaxTokens: 4,
			Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}})
	}
	reqs[7].Messages = nil                                                                                      // refused: no messages
	reqs[900] = &contracts.JobRequest{ID: reqs[899].ID, Model: "m", MaxTokens: 4, Messages: reqs[899].Messages} // a repeat
	ids, errs := c.SubmitMany(ctx, reqs, nil)
	for i := range reqs {
		switch {
		case i == 7:
			if !errors.Is(errs[i], contracts.CodeMissingMessages) || ids[i] != "" {
				t.Errorf("request 7: id %q, err %v: want missing_messages", ids[i], errs[i])
			}
		case errs[i] != nil || ids[i] != reqs[i].ID:
			t.Errorf("request %d: id %q, err %v", i, ids[i], errs[i])
		}
	}
	s, err := srv.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != n-2 {
		t.Errorf("the stream holds %d jobs, want %d (one refused, one repeat)", got, n-2)
	}
}

// TestSubmitToFullQueue: with ZL_JOBS capped at 5 jobs and no worker, the
// sixth submit is refused with CodeOverloaded at once (retryable, nothing
// stored), Submit and SubmitMany alike, while a repeat of a queued job is
// still the same job, not an error.
func TestSubmitToFullQueue(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	if err := contracts.EnsureStreams(context.Background(), srv.JS, contracts.StreamsConfig{JobsMaxMsgs: 5}); err != nil {
		t.Fatal(err)
	}
	c, err := producer.New(srv.Conn, producer.Config{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	job := func(i int) *contracts.JobRequest {
		return &contracts.JobRequest{ID: fmt.Sprintf("j%d", i), Model: "m", MaxTokens: 4, Messages: []contracts.Message{{Role: "user", Content: "hi"}}}
	}
	for i := range 5 {
		if _, err := c.Submit(ctx, job(i), nil); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	began := time.Now()
	_, err = c.Submit(ctx, job(5), nil)
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.Code != contracts.CodeOverloaded || !ce.Retryable() || time.Since(began) > 5*time.Second {
		t.Fatalf("sixth job into a queue of five: %v after %v, want %s at once", err, time.Since(began), contracts.CodeOverloaded)
	}
	t.Logf("refused: %v", err)
	if id, err := c.Submit(ctx, job(2), nil); err != nil || id != "j2" {
		t.Errorf("a repeat of a queued job into the full queue: %q %v", id, err)
	}
	_, errs := c.SubmitMany(ctx, []*contracts.JobRequest{job(6), job(7)}, nil)
	for i, err := range errs {
		if !errors.Is(err, contracts.CodeOverloaded) {
			t.Errorf("SubmitMany %d: %v, want %s", i, err, contracts.CodeOverloaded)
		}
	}
}

// TestSubmitSendsAgainWhenTheAckIsLost: a publish whose acknowledgement
// never comes (here no stream stores it and a subscriber takes it, as
// when the stream's leader goes down with it) is sent again after a
// second, and the job is stored once the stream is back, instead of the
// submit waiting out its whole timeout (10 s) and failing.
func TestSubmitSendsAgainWhenTheAckIsLost(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	for _, many := range []bool{false, true} {
		if err := srv.JS.DeleteStream(ctx, contracts.StreamJobs); err != nil {
			t.Fatal(err)
		}
		sub, err := srv.Conn.SubscribeSync(contracts.SubjectJobsPrefix + ">")
		if err != nil {
			t.Fatal(err)
		}
		back := make(chan error, 1)
		go func() {
			// The first publish is taken by the subscriber; the stream is
			// back before the second.
			if _, err := sub.NextMsg(5 * time.Second); err != nil {
				back <- err
				return
			}
			sub.Unsubscribe()
			back <- contracts.EnsureStreams(ctx, srv.JS, contracts.StreamsConfig{})
		}()
		start := time.Now()
		req := &contracts.JobRequest{Model: "m", Messages: []contracts.Message{{Role: "user", Content: "hi"}}, MaxTokens: 4}
		var id string
		if many {
			ids, errs := c.SubmitMany(ctx, []*contracts.JobRequest{req}, nil)
			id, err = ids[0], errs[0]
		} else {
			id, err = c.Submit(ctx, req, nil)
		}
		if err != nil {
			t.Fatalf("many=%v: submit after a lost acknowledgement: %v (after %v)", many, err, time.Since(start))
		}
		if err := <-back; err != nil {
			t.Fatal(err)
		}
		t.Logf("many=%v: stored %v after the first publish", many, time.Since(start))
		s, err := srv.JS.Stream(ctx, contracts.StreamJobs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetLastMsgForSubject(ctx, contracts.SubjectJobsPrefix+"*.*.acme.*."+id); err != nil {
			t.Errorf("many=%v: job %s not stored: %v", many, id, err)
		}
		if info, _ := s.Info(ctx); info.State.Msgs != 1 {
			t.Errorf("many=%v: %d jobs stored, want 1", many, info.State.Msgs)
		}
	}
}
