package contracts_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// setup starts an embedded JetStream server and ensures the streams.
func setup(t *testing.T, cfg contracts.StreamsConfig) *natstest.Server {
	t.Helper()
	ns := natstest.Run(t)
	if err := contracts.EnsureStreams(t.Context(), ns.JS, cfg); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	return ns
}

func TestEnsureStreamsIdempotent(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()

	// A second run, and a third from another connection, change nothing.
	if err := contracts.EnsureStreams(ctx, ns.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatalf("second EnsureStreams: %v", err)
	}
	_, js2 := ns.Connect(t)
	if err := contracts.EnsureStreams(ctx, js2, contracts.StreamsConfig{}); err != nil {
		t.Fatalf("third EnsureStreams: %v", err)
	}

	var names []string
	for name := range ns.JS.StreamNames(ctx).Name() {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"KV_" + contracts.CancelBucket, "KV_" + contracts.TenantLimitsBucket, contracts.StreamDLQ, contracts.StreamEvents, contracts.StreamJobs, contracts.StreamResults, contracts.StreamUsage}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("streams = %v, want %v", names, want)
	}

	info := func(name string) jetstream.StreamConfig {
		s, err := ns.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}
	jobs := info(contracts.StreamJobs)
	if jobs.Retention != jetstream.WorkQueuePolicy || jobs.Duplicates < contracts.MinDuplicateWindow || jobs.MaxAge != 24*time.Hour ||
		!slices.Equal(jobs.Subjects, contracts.JobsSubjects()) || len(jobs.Subjects) != 9 {
		t.Errorf("ZL_JOBS config = %+v", jobs)
	}
	if ev := info(contracts.StreamEvents); ev.Retention != jetstream.LimitsPolicy || ev.MaxAge != time.Hour {
		t.Errorf("ZL_EVENTS config = %+v", ev)
	}
	if res := info(contracts.StreamResults); res.MaxMsgsPerSubject != 1 || res.MaxAge < contracts.MinResultsMaxAge {
		t.Errorf("ZL_RESULTS config = %+v", res)
	}
	if u := info(contracts.StreamUsage); u.Retention != jetstream.LimitsPolicy || u.MaxAge < 30*24*time.Hour {
		t.Errorf("ZL_USAGE config = %+v", u)
	}
	if d := info(contracts.StreamDLQ); !slices.Equal(d.Subjects, []string{"zl.dlq.*.*.*"}) {
		t.Errorf("ZL_DLQ config = %+v", d)
	}

	var consumers []string
	stream, err := ns.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	for ci := range stream.ListConsumers(ctx).Info() {
		consumers = append(consumers, ci.Name)
		if ci.Config.FilterSubject == "" || ci.Config.AckPolicy != jetstream.AckExplicitPolicy || ci.Config.MaxDeliver != 5 || ci.Config.AckWait != 30*time.Second {
			t.Errorf("consumer %s config = %+v", ci.Name, ci.Config)
		}
	}
	if len(consumers) != 9 {
		t.Errorf("consumers = %v, want 9", consumers)
	}
}

func TestEnsureStreamsUpdates(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	cfg := contracts.StreamsConfig{
		AckWait:         2 * time.Minute,
		MaxDeliver:      3,
		BackOff:         []time.Duration{10 * time.Second, time.Minute},
		EventsMaxAge:    2 * time.Hour,
		DuplicateWindow: 20 * time.Minute,
	}
	if err := contracts.EnsureStreams(ctx, ns.JS, cfg); err != nil {
		t.Fatalf("EnsureStreams with new settings: %v", err)
	}
	c, err := ns.JS.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(contracts.PriorityLow, contracts.BucketLong))
	if err != nil {
		t.Fatal(err)
	}
	got := c.CachedInfo().Config
	if got.MaxDeliver != 3 || !slices.Equal(got.BackOff, cfg.BackOff) {
		t.Errorf("consumer not updated: %+v", got)
	}
	s, err := ns.JS.Stream(ctx, contracts.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if s.CachedInfo().Config.MaxAge != 2*time.Hour {
		t.Errorf("ZL_EVENTS MaxAge = %v", s.CachedInfo().Config.MaxAge)
	}
}

func TestStreamsConfigValidate(t *testing.T) {
	t.Parallel()
	bad := []contracts.StreamsConfig{
		{DuplicateWindow: time.Minute},
		{JobTTL: 5 * time.Minute},
		{ResultsMaxAge: 24 * time.Hour},
		{Replicas: 7},
		{MaxDeliver: -1},
		{MaxDeliver: 2, BackOff: []time.Duration{time.Second, time.Second, time.Second}},
		{BackOff: []time.Duration{time.Millisecond}},
		{AckWait: time.Millisecond},
	}
	for _, cfg := range bad {
		if err := cfg.WithDefaults().Validate(); err == nil {
			t.Errorf("Validate accepted %+v", cfg)
		}
		// EnsureStreams refuses it before touching the server.
		if err := contracts.EnsureStreams(context.Background(), nil, cfg); err == nil {
			t.Errorf("EnsureStreams accepted %+v", cfg)
		}
	}
	if err := (contracts.StreamsConfig{}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// TestDedupeWindow publishes the same job twice with one Nats-Msg-Id: the
// stream keeps one message and the second ack says Duplicate.
func TestDedupeWindow(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	subj := contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, "acme")
	publish := func(body string) *jetstream.PubAck {
		msg := &nats.Msg{Subject: subj, Data: []byte(body), Header: contracts.NewHeader("job-1", "acme", contracts.NewTraceparent())}
		ack, err := ns.JS.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	first := publish(`{"model":"m","messages":[{"role":"user","content":"a"}]}`)
	second := publish(`{"model":"m","messages":[{"role":"user","content":"a"}]}`)
	if first.Duplicate || !second.Duplicate || second.Sequence != first.Sequence {
		t.Errorf("acks: first %+v, second %+v", first, second)
	}
	s, err := ns.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 1 {
		t.Errorf("ZL_JOBS holds %d messages, want 1", si.State.Msgs)
	}
	// Another id is a new job.
	msg := &nats.Msg{Subject: subj, Data: []byte(`{}`), Header: contracts.NewHeader("job-2", "acme", contracts.Traceparent{})}
	if ack, err := ns.JS.PublishMsg(ctx, msg); err != nil || ack.Duplicate {
		t.Errorf("job-2: %+v, %v", ack, err)
	}
}

// TestWorkQueueFilters publishes one job per priority and bucket and wants
// each consumer to see exactly its own; a consumer whose filter overlaps
// theirs is refused, as the work-queue stream requires.
func TestWorkQueueFilters(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	for _, p := range contracts.Priorities() {
		for _, b := range contracts.AllBuckets() {
			id := string(p) + "-" + string(b)
			msg := &nats.Msg{Subject: contracts.JobSubject(p, b, "tenant_"+id), Data: []byte(id), Header: contracts.NewHeader(id, "tenant_"+id, contracts.Traceparent{})}
			if _, err := ns.JS.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range contracts.Priorities() {
		for _, b := range contracts.AllBuckets() {
			c, err := ns.JS.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(p, b))
			if err != nil {
				t.Fatal(err)
			}
			// The one message of each filter, waited for (a no-wait fetch
			// right after the publish can come back empty on a loaded
			// machine), then any others, which must not exist.
			first, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var msgs []jetstream.Msg
			for m := range first.Messages() {
				msgs = append(msgs, m)
			}
			rest, err := c.FetchNoWait(4)
			if err != nil {
				t.Fatal(err)
			}
			for m := range rest.Messages() {
				msgs = append(msgs, m)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, string(m.Data()))
				route, err := contracts.ParseJobSubject(m.Subject())
				if err != nil || route.Priority != p || route.Bucket != b {
					t.Errorf("%s got subject %s (%+v, %v)", contracts.ConsumerName(p, b), m.Subject(), route, err)
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if want := string(p) + "-" + string(b); !slices.Equal(got, []string{want}) {
				t.Errorf("%s fetched %v, want [%s]", contracts.ConsumerName(p, b), got, want)
			}
		}
	}
	// Acked jobs leave the work-queue stream.
	s, err := ns.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	if si, err := s.Info(ctx); err != nil || si.State.Msgs != 0 {
		t.Errorf("ZL_JOBS after acks: %+v, %v", si.State, err)
	}
	_, err = ns.JS.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, jetstream.ConsumerConfig{
		Durable:       "rogue",
		AckPolicy:     jetstream.AckExplicitPolicy,
		FilterSubject: "zl.jobs.high.>",
	})
	if err == nil {
		t.Error("an overlapping consumer was created on the work-queue stream")
	}
}

// TestJobsStreamRefusesUnknownClasses publishes jobs on a known and on
// unknown priorities and buckets: only the known one is stored, the others
// get no JetStream acknowledgement instead of expiring unserved.
func TestJobsStreamRefusesUnknownClasses(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	for _, tc := range []struct {
		subject string
		wantErr error
	}{
		{"zl.jobs.high.short.acme", nil},
		{"zl.jobs.low.long.globex", nil},
		{"zl.jobs.urgent.short.acme", jetstream.ErrNoStreamResponse},
		{"zl.jobs.high.tiny.acme", jetstream.ErrNoStreamResponse},
		{"zl.jobs.high.short.acme.extra", jetstream.ErrNoStreamResponse},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			_, err := ns.JS.Publish(ctx, tc.subject, []byte("{}"))
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("publish on %s: err = %v, want %v", tc.subject, err, tc.wantErr)
			}
		})
	}
	if n := jobsMsgs(t, ns.JS); n != 2 {
		t.Errorf("ZL_JOBS holds %d messages, want the 2 on known classes", n)
	}
}

// TestEnsureStreamsMigratesOldJobsSubjects runs EnsureStreams over a
// ZL_JOBS made by an older release, bound to zl.jobs.>: the stream is
// narrowed in place, its messages stay, a queued job of a known class is
// still served, and unknown classes are refused from then on.
func TestEnsureStreamsMigratesOldJobsSubjects(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	ctx := t.Context()
	cfg := contracts.StreamsConfig{}.WithDefaults()
	old := cfg.StreamConfigs()[0]
	old.Subjects = []string{"zl.jobs.>"}
	if _, err := ns.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"zl.jobs.high.short.acme", "zl.jobs.urgent.short.acme"} {
		if _, err := ns.JS.Publish(ctx, subj, []byte(subj)); err != nil {
			t.Fatalf("publish on the old stream: %v", err)
		}
	}

	if err := contracts.EnsureStreams(ctx, ns.JS, cfg); err != nil {
		t.Fatalf("EnsureStreams over the old stream: %v", err)
	}
	s, err := ns.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, contracts.JobsSubjects()) {
		t.Errorf("ZL_JOBS subjects after migration = %v, want %v", got, contracts.JobsSubjects())
	}
	if n := jobsMsgs(t, ns.JS); n != 2 {
		t.Errorf("ZL_JOBS holds %d messages after migration, want 2", n)
	}
	if _, err := ns.JS.Publish(ctx, "zl.jobs.urgent.short.acme", nil); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("publish on an unknown priority after migration: err = %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
	c, err := ns.JS.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(contracts.PriorityHigh, contracts.BucketShort))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
	}
	if !slices.Equal(got, []string{"zl.jobs.high.short.acme"}) {
		t.Errorf("queued job after migration: fetched %v", got)
	}
}

// jobsMsgs returns how many messages ZL_JOBS holds.
func jobsMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	si, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return si.State.Msgs
}

// TestResultsKeepLastPerJob publishes two results for one job: the stream
// keeps the last, which a client fetches by subject.
func TestResultsKeepLastPerJob(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	subj := contracts.ResultsSubject("job-9")
	for i, body := range []string{`{"attempt":1}`, `{"attempt":2}`} {
		h := contracts.NewHeader("job-9-"+string(rune('a'+i)), "acme", contracts.Traceparent{})
		if _, err := ns.JS.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: []byte(body), Header: h}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ns.JS.Stream(ctx, contracts.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `{"attempt":2}` {
		t.Errorf("last result = %s", m.Data)
	}
	if si, err := s.Info(ctx); err != nil || si.State.Msgs != 1 {
		t.Errorf("ZL_RESULTS holds %+v, %v; want 1 message", si.State, err)
	}
}

func TestCancelBucket(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	kv, err := ns.JS.KeyValue(ctx, contracts.CancelBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9", []byte("canceled")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "job-unknown"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get(unknown) = %v", err)
	}
}

// TestStoredJobNotice: once ZL_JOBS has stored a job, its headers alone
// (no payload) go out on zl.stored.jobs.<priority>.<bucket>.<tenant>,
// which is what workers wake on.
func TestStoredJobNotice(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	sub, err := ns.Conn.SubscribeSync(contracts.SubjectStoredJobsAll)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: contracts.JobSubject(contracts.PriorityHigh, contracts.BucketShort, "acme"), Data: []byte(`{"model":"m"}`),
		Header: contracts.NewHeader("job-1", "acme", contracts.Traceparent{})}
	if _, err := ns.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	notice, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if notice.Subject != "zl.stored.jobs.high.short.acme" || len(notice.Data) != 0 || notice.Header.Get("Nats-Msg-Id") != "job-1" {
		t.Errorf("notice %s %q %v", notice.Subject, notice.Data, notice.Header)
	}
}
