package contracts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	want := []string{contracts.StreamCancel, "KV_" + contracts.TenantLimitsBucket, "KV_" + contracts.WorkersBucket, "KV_" + contracts.ModelsBucket, "KV_" + contracts.PrefixesBucket, contracts.StreamDLQ, contracts.StreamEvents, contracts.StreamJobs, contracts.StreamResults, contracts.StreamUsage}
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
		!slices.Equal(jobs.Subjects, contracts.JobsSubjects()) || len(jobs.Subjects) != 19 ||
		jobs.MaxMsgsPerSubject != 1 || jobs.Discard != jetstream.DiscardNew || !jobs.DiscardNewPerSubject {
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
	if c := info(contracts.StreamCancel); !slices.Equal(c.Subjects, []string{"zl.cancel.*.*"}) || c.MaxMsgsPerSubject != 1 ||
		!c.AllowDirect || c.AllowRollup || c.MaxAge != 24*time.Hour {
		t.Errorf("ZL_CANCEL config = %+v", c)
	}

	var consumers []string
	stream, err := ns.JS.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	for ci := range stream.ListConsumers(ctx).Info() {
		consumers = append(consumers, ci.Name)
		if ci.Config.FilterSubject == "" || ci.Config.AckPolicy != jetstream.AckExplicitPolicy || ci.Config.MaxDeliver != 5 || ci.Config.AckWait != contracts.DefaultAckWait {
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

// TestEnsureStreamsUpdatesTenantConsumers: the class-and-tenant consumers
// workers made under an earlier release's ack wait (30 s) get the
// configured one from provisioning; other consumers on ZL_JOBS are left
// as they are.
func TestEnsureStreamsUpdatesTenantConsumers(t *testing.T) {
	t.Parallel()
	old := contracts.StreamsConfig{AckWait: 30 * time.Second}.WithDefaults()
	ns := setup(t, old)
	ctx := t.Context()
	made := []jetstream.ConsumerConfig{
		old.TenantConsumerConfig(contracts.PriorityHigh, contracts.BucketShort, "acme"),
		old.TenantConsumerConfig(contracts.PriorityLow, contracts.BucketLong, "globex-eu_2"),
	}
	other := jetstream.ConsumerConfig{Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, FilterSubject: contracts.TenantJobsFilter(contracts.PriorityNormal, contracts.BucketMedium, "initech")}
	for _, cc := range append(made, other) {
		if _, err := ns.JS.CreateConsumer(ctx, contracts.StreamJobs, cc); err != nil {
			t.Fatalf("%s: %v", cc.Durable, err)
		}
	}
	if err := contracts.EnsureStreams(ctx, ns.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	ackWait := func(name string) time.Duration {
		t.Helper()
		c, err := ns.JS.Consumer(ctx, contracts.StreamJobs, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return c.CachedInfo().Config.AckWait
	}
	for _, cc := range made {
		if got := ackWait(cc.Durable); got != contracts.DefaultAckWait {
			t.Errorf("%s: ack wait %v, want %v", cc.Durable, got, contracts.DefaultAckWait)
		}
	}
	if got := ackWait(contracts.ConsumerName(contracts.PriorityHigh, contracts.BucketShort)); got != contracts.DefaultAckWait {
		t.Errorf("class consumer: ack wait %v, want %v", got, contracts.DefaultAckWait)
	}
	if got := ackWait("audit"); got != time.Minute {
		t.Errorf("a consumer not of the contract was changed: ack wait %v", got)
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

// TestJobsDedupeOnTenantAndID: ZL_JOBS holds one job per tenant and id.
// The same id again from the same tenant is refused as a duplicate
// whatever its headers say; the same id from another tenant is another
// job; and a Nats-Msg-Id forged by one tenant (the other's id) does not
// make the stream drop the other tenant's job.
func TestJobsDedupeOnTenantAndID(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	publish := func(tenant, id, msgID string) error {
		msg := &nats.Msg{Subject: contracts.JobSubject(contracts.PriorityNormal, contracts.BucketShort, tenant, "m", id),
			Data: []byte(`{"model":"m","messages":[{"role":"user","content":"a"}]}`), Header: contracts.NewHeader(tenant, contracts.NewTraceparent())}
		if msgID != "" {
			msg.Header.Set(contracts.HeaderMsgID, msgID)
		}
		_, err := ns.JS.PublishMsg(ctx, msg)
		return err
	}
	if err := publish("acme", "job-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := publish("acme", "job-1", "something-else"); !contracts.IsDuplicateJob(err) {
		t.Errorf("the same tenant and id again: err = %v, want a duplicate", err)
	}
	// beta forges acme's next ids as its own jobs' Nats-Msg-Ids.
	for i, forged := range []string{"job-2", "acme/job-2", "acme.job-2"} {
		if err := publish("beta", fmt.Sprintf("forger-%d", i), forged); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish("acme", "job-2", ""); err != nil {
		t.Errorf("acme's job-2 after beta forged its Nats-Msg-Id: %v", err)
	}
	if err := publish("beta", "job-1", ""); err != nil {
		t.Errorf("beta's job-1 (acme has one too): %v", err)
	}
	if n := jobsMsgs(t, ns.JS); n != 6 {
		t.Errorf("ZL_JOBS holds %d messages, want 6", n)
	}
	if contracts.IsDuplicateJob(errors.New("maximum messages per subject exceeded")) || contracts.IsDuplicateJob(nil) {
		t.Error("IsDuplicateJob matched something other than JetStream's error")
	}
}

// TestWorkQueueFilters publishes one job per priority and bucket, each of
// its own tenant, in the model-less form, and one per priority and bucket
// for each of two models in the current form, and wants each
// class-and-tenant consumer to see exactly its own model-less job, and
// each model's consumer exactly its model's (the class consumers, which
// serve only the old subject form, see none); a consumer whose filter
// overlaps theirs is refused, as the work-queue stream requires.
func TestWorkQueueFilters(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	for _, p := range contracts.Priorities() {
		for _, b := range contracts.AllBuckets() {
			id := string(p) + "-" + string(b)
			msg := &nats.Msg{Subject: contracts.ModellessJobSubject(p, b, "tenant_"+id, id), Data: []byte(id), Header: contracts.NewHeader("tenant_"+id, contracts.Traceparent{})}
			if _, err := ns.JS.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
			for _, model := range []string{"m.1", "m-2"} {
				msg := &nats.Msg{Subject: contracts.JobSubject(p, b, "tenant_"+id, model, id), Data: []byte(model + "/" + id), Header: contracts.NewHeader("tenant_"+id, contracts.Traceparent{})}
				if _, err := ns.JS.PublishMsg(ctx, msg); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, p := range contracts.Priorities() {
		for _, b := range contracts.AllBuckets() {
			if old, err := ns.JS.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(p, b)); err != nil {
				t.Fatal(err)
			} else if batch, err := old.FetchNoWait(1); err == nil {
				for m := range batch.Messages() {
					t.Errorf("the class consumer %s got %s", contracts.ConsumerName(p, b), m.Subject())
				}
			}
			tenant := "tenant_" + string(p) + "-" + string(b)
			for _, model := range []string{"", "m.1", "m-2"} {
				cc := contracts.StreamsConfig{}.WithDefaults().TenantConsumerConfig(p, b, tenant)
				want := string(p) + "-" + string(b)
				if model != "" {
					cc = contracts.StreamsConfig{}.WithDefaults().ModelConsumerConfig(p, b, tenant, model)
					want = model + "/" + want
				}
				fetchOnly(t, ns.JS, cc, want)
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
	for _, filter := range []string{"zl.jobs.high.>", "zl.jobs.high.short.*.*.*", "zl.jobs.high.short.tenant_high-short.*.*"} {
		_, err = ns.JS.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, jetstream.ConsumerConfig{
			Durable:       "rogue",
			AckPolicy:     jetstream.AckExplicitPolicy,
			FilterSubject: filter,
		})
		if err == nil {
			t.Errorf("a consumer overlapping on %s was created on the work-queue stream", filter)
		}
	}
}

// fetchOnly creates the consumer cc and wants it to hold exactly one job,
// whose body is want; it acks it.
func fetchOnly(t *testing.T, js jetstream.JetStream, cc jetstream.ConsumerConfig, want string) {
	t.Helper()
	ctx := t.Context()
	tokens := strings.Split(cc.FilterSubject, ".")
	p, b := contracts.Priority(tokens[2]), contracts.Bucket(tokens[3])
	c, err := js.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, cc)
	if err != nil {
		t.Fatal(err)
	}
	// The one message of each filter, waited for (a no-wait fetch right
	// after the publish can come back empty on a loaded machine), then any
	// others, which must not exist.
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
			t.Errorf("%s got subject %s (%+v, %v)", cc.Durable, m.Subject(), route, err)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{want}) {
		t.Errorf("%s fetched %v, want [%s]", cc.Durable, got, want)
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
		{"zl.jobs.high.short.acme.j1", nil},
		{"zl.jobs.low.long.globex.j1", nil},
		{"zl.jobs.urgent.short.acme.j2", jetstream.ErrNoStreamResponse},
		{"zl.jobs.high.tiny.acme.j3", jetstream.ErrNoStreamResponse},
		{"zl.jobs.high.short.acme", jetstream.ErrNoStreamResponse}, // the old form
		{"zl.jobs.high.short.acme.m.j4", nil},
		{"zl.jobs.high.short.acme.m.j4.extra", jetstream.ErrNoStreamResponse},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			_, err := ns.JS.Publish(ctx, tc.subject, []byte("{}"))
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("publish on %s: err = %v, want %v", tc.subject, err, tc.wantErr)
			}
		})
	}
	if n := jobsMsgs(t, ns.JS); n != 3 {
		t.Errorf("ZL_JOBS holds %d messages, want the 3 on known classes", n)
	}
}

// TestEnsureStreamsMigratesOldJobsSubjects runs EnsureStreams over a
// ZL_JOBS made by an older release, bound to zl.jobs.> and holding two
// queued jobs of one tenant on one subject of the old form: the stream is
// rebound in place, no queued job is dropped (the one-per-subject limit
// waits), both are still served, unknown classes are refused from then
// on, and once they have drained the next EnsureStreams applies the limit.
func TestEnsureStreamsMigratesOldJobsSubjects(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	ctx := t.Context()
	cfg := contracts.StreamsConfig{}.WithDefaults()
	old := cfg.StreamConfigs()[0]
	old.Subjects = []string{"zl.jobs.>"}
	old.MaxMsgsPerSubject, old.Discard, old.DiscardNewPerSubject = -1, jetstream.DiscardOld, false
	if _, err := ns.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	for i, subj := range []string{"zl.jobs.high.short.acme", "zl.jobs.high.short.acme", "zl.jobs.urgent.short.acme"} {
		if _, err := ns.JS.Publish(ctx, subj, []byte(fmt.Sprintf("%s#%d", subj, i))); err != nil {
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
	if got := s.CachedInfo().Config; !slices.Equal(got.Subjects, contracts.JobsSubjects()) || got.MaxMsgsPerSubject == 1 {
		t.Errorf("ZL_JOBS after migration: subjects %v (want %v), max per subject %d (want unlimited while old jobs are queued)",
			got.Subjects, contracts.JobsSubjects(), got.MaxMsgsPerSubject)
	}
	if n := jobsMsgs(t, ns.JS); n != 3 {
		t.Errorf("ZL_JOBS holds %d messages after migration, want 3", n)
	}
	if _, err := ns.JS.Publish(ctx, "zl.jobs.urgent.short.acme.j1", nil); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("publish on an unknown priority after migration: err = %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
	c, err := ns.JS.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(contracts.PriorityHigh, contracts.BucketShort))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		batch, err := c.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := len(got)
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			m.DoubleAck(ctx)
		}
		if len(got) == n {
			break
		}
	}
	if !slices.Equal(got, []string{"zl.jobs.high.short.acme#0", "zl.jobs.high.short.acme#1"}) {
		t.Errorf("queued jobs after migration: fetched %v", got)
	}
	// Drained (the urgent one is on no class; an operator purges it).
	if err := s.Purge(ctx, jetstream.WithPurgeSubject("zl.jobs.urgent.short.acme")); err != nil {
		t.Fatal(err)
	}
	if err := contracts.EnsureStreams(ctx, ns.JS, cfg); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.Config.MaxMsgsPerSubject != 1 || !info.Config.DiscardNewPerSubject {
		t.Errorf("ZL_JOBS after the old jobs drained: %+v, %v; want one message per subject", info, err)
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
	subj := contracts.ResultsSubject("acme", "job-9")
	for i, body := range []string{`{"attempt":1}`, `{"attempt":2}`} {
		h := contracts.NewHeader("acme", contracts.Traceparent{})
		h.Set(contracts.HeaderMsgID, "acme/job-9/"+string(rune('a'+i)))
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
	// The same through LastMsg (direct get), and nothing for another
	// tenant's job of the same id.
	if dm, err := contracts.LastMsg(ctx, ns.Conn, contracts.StreamResults, subj); err != nil || dm == nil || string(dm.Data) != `{"attempt":2}` {
		t.Errorf("LastMsg = %v, %v", dm, err)
	}
	if dm, err := contracts.LastMsg(ctx, ns.Conn, contracts.StreamResults, contracts.ResultsSubject("beta", "job-9")); err != nil || dm != nil {
		t.Errorf("LastMsg(beta's job-9) = %v, %v; want none", dm, err)
	}
	if si, err := s.Info(ctx); err != nil || si.State.Msgs != 1 {
		t.Errorf("ZL_RESULTS holds %+v, %v; want 1 message", si.State, err)
	}
}

// TestCancelStream: a cancel request is stored per tenant and job id and
// found by LastMsg; a KV-style roll-up of the whole stream is refused.
func TestCancelStream(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	ctx := t.Context()
	if _, err := ns.JS.Publish(ctx, contracts.CancelSubject("acme", "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9"), nil); err != nil {
		t.Fatal(err)
	}
	if m, err := contracts.LastMsg(ctx, ns.Conn, contracts.StreamCancel, contracts.CancelSubject("acme", "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9")); err != nil || m == nil {
		t.Errorf("LastMsg(cancel) = %v, %v", m, err)
	}
	if m, err := contracts.LastMsg(ctx, ns.Conn, contracts.StreamCancel, contracts.CancelSubject("beta", "job_01J9Z8Q4W6K2M3N4P5R6S7T8V9")); err != nil || m != nil {
		t.Errorf("LastMsg(another tenant's) = %v, %v; want none", m, err)
	}
	roll := nats.NewMsg(contracts.CancelSubject("beta", "x"))
	roll.Header.Set("Nats-Rollup", "all")
	if _, err := ns.JS.PublishMsg(ctx, roll); err == nil {
		t.Error("a roll-up purged ZL_CANCEL")
	}
}

// TestStoredJobNotice: once ZL_JOBS has stored a job, its headers alone
// (no payload) go out on zl.stored.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>,
// which is what workers wake on.
func TestStoredJobNotice(t *testing.T) {
	t.Parallel()
	ns := setup(t, contracts.StreamsConfig{})
	sub, err := ns.Conn.SubscribeSync(contracts.SubjectStoredJobsAll)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: contracts.JobSubject(contracts.PriorityHigh, contracts.BucketShort, "acme", "m", "job-1"), Data: []byte(`{"model":"m"}`),
		Header: contracts.NewHeader("acme", contracts.Traceparent{})}
	if _, err := ns.JS.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	notice, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if notice.Subject != "zl.stored.jobs.high.short.acme.m.job-1" || len(notice.Data) != 0 || notice.Header.Get(contracts.HeaderTenant) != "acme" {
		t.Errorf("notice %s %q %v", notice.Subject, notice.Data, notice.Header)
	}
}
