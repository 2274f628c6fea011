package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/internal/billtest"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// delivery is one call of the ingester's afterCommit hook.
type delivery struct {
	inserted bool
	n        uint64
}

// ingestBundle is a running billing service on an embedded JetStream
// server and a fresh schema.
type ingestBundle struct {
	ns   *natstest.Server
	svc  *Service
	logs *natstest.LogBuffer

	mu         sync.Mutex
	deliveries map[string][]delivery
}

// jobKey names tenant's job jobID in crashOnce and the deliveries: job ids
// are unique per tenant only.
func jobKey(tenant, jobID string) string { return tenant + "/" + jobID }

// setupIngest starts a service whose ingester "crashes" between commit
// and ack on the first delivery of each job in crashOnce (jobKeys).
func setupIngest(t *testing.T, crashOnce ...string) *ingestBundle {
	t.Helper()
	return startIngest(t, true, IngesterConfig{}, crashOnce...)
}

// startIngest is setupIngest on a server that has the streams only if
// streams is set, with ic's Provision and Streams.
func startIngest(t *testing.T, streams bool, ic IngesterConfig, crashOnce ...string) *ingestBundle {
	t.Helper()
	b := &ingestBundle{ns: natstest.Run(t), logs: &natstest.LogBuffer{}, deliveries: map[string][]delivery{}}
	if streams {
		if err := contracts.EnsureStreams(t.Context(), b.ns.JS, contracts.StreamsConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	pool := dbtest.Pool(t)
	// AckWait is long enough for a transaction under -race on a loaded
	// machine.
	ic.AckWait, ic.RetryDelay = 2*time.Second, 100*time.Millisecond
	svc, err := NewService(Config{
		DB:        pool,
		JetStream: b.ns.JS,
		Logger:    slog.New(slog.NewTextHandler(b.logs, nil)),
		Ingester:  ic,
		River:     RiverConfig{RollupDelay: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.ingester.afterCommit = func(tenant, jobID string, inserted bool, n uint64) bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		key := jobKey(tenant, jobID)
		b.deliveries[key] = append(b.deliveries[key], delivery{inserted, n})
		return !(slices.Contains(crashOnce, key) && n == 1)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	b.svc = svc
	return b
}

// publish publishes body on zl.usage.<tenant> with Nats-Msg-Id msgID and
// reports whether JetStream stored it (false: deduplicated).
func (b *ingestBundle) publish(t *testing.T, tenant, msgID string, body []byte) bool {
	t.Helper()
	msg := &nats.Msg{Subject: contracts.UsageSubject(tenant), Data: body, Header: contracts.NewHeader(tenant, contracts.Traceparent{})}
	msg.Header.Set(contracts.HeaderMsgID, msgID)
	ack, err := b.ns.JS.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	return !ack.Duplicate
}

func (b *ingestBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.svc.cfg.DB.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIngestEndToEnd(t *testing.T) {
	t.Parallel()
	crashed := jobKey("beta", "job-03")
	b := setupIngest(t, crashed)
	ctx := t.Context()

	// Ten records over two tenants and two days, with figures on both
	// sides of the tag thresholds.
	day := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	var records []contracts.Usage
	for i := range 10 {
		tenant := []string{"acme", "beta"}[i%2]
		u := billtest.Usage(fmt.Sprintf("job-%02d", i), tenant, "stories260K", day.Add(time.Duration(i)*6*time.Hour),
			100+i*37, 150+i*13, 30+float64(i)*4.125, float64(i)*0.3, 0.9+float64(i)*0.01)
		records = append(records, u)
		if !b.publish(t, tenant, u.JobID, billtest.MustJSON(t, u)) {
			t.Fatalf("%s deduplicated by JetStream", u.JobID)
		}
	}
	// The same job published again inside the duplicate window is dropped
	// by JetStream itself.
	if b.publish(t, "beta", records[1].JobID, billtest.MustJSON(t, records[1])) {
		t.Error("JetStream stored a second message with the same Nats-Msg-Id")
	}
	// A second record of job-05 with another message id reaches billing,
	// which must not bill the job twice (the first record wins).
	again := records[5]
	again.OutputTokens = 999_999
	if !b.publish(t, again.Tenant, "job-05-second", billtest.MustJSON(t, again)) {
		t.Fatal("second record deduplicated by JetStream")
	}
	// Malformed records: not a usage record, and a record of one tenant
	// published on another tenant's subject.
	b.publish(t, "acme", "bad-1", []byte(`{"job_id": 1, "tenant": "acme"}`))
	b.publish(t, "acme", "bad-2", billtest.MustJSON(t, records[1]))

	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		s := b.svc.Ingester().Stats()
		// Duplicates: job-05's second record and job-03's redelivery.
		return s.Stored == 10 && s.Duplicates == 2 && s.Terminated == 2, fmt.Sprintf("stats %+v", s)
	})
	pool := b.svc.cfg.DB
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		n := b.count(t, "SELECT count(*) FROM charges")
		return n == 10, fmt.Sprintf("%d charges", n)
	})
	if n := b.count(t, "SELECT count(*) FROM usage"); n != 10 {
		t.Errorf("%d usage rows, want 10", n)
	}
	if n := b.count(t, "SELECT count(*) FROM river_job WHERE kind = $1", RateArgs{}.Kind()); n != 10 {
		t.Errorf("%d rating jobs, want 10", n)
	}

	for _, u := range records {
		c, err := GetCharge(ctx, pool, u.Tenant, u.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if want := billtest.DefaultHandCost(u); !c.Cost.Equal(want) {
			t.Errorf("%s: charge %+v, want %+v", u.JobID, c.Cost, want)
		}
		if c.PriceBookVersion != 1 || c.Currency != "USD" || c.Revision != 1 || c.Tenant != u.Tenant {
			t.Errorf("%s: charge %+v", u.JobID, c)
		}
		var wantTags []string
		if u.TimeToFirstTokenMs > 50 {
			wantTags = append(wantTags, "high_latency_risk")
		}
		if u.ToolExecutionTimeMs > 1.0 {
			wantTags = append(wantTags, "tool_optimization_needed")
		}
		if u.OutputTokens > 200 && decimal.NewFromFloat(u.Confidence).GreaterThan(dec("0.95")) {
			wantTags = append(wantTags, "effective_service")
		}
		slices.Sort(wantTags)
		if !slices.Equal(c.Tags, wantTags) && !(len(c.Tags) == 0 && len(wantTags) == 0) {
			t.Errorf("%s: tags %v, want %v", u.JobID, c.Tags, wantTags)
		}
		stored, err := GetUsage(ctx, pool, u.Tenant, u.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.OutputTokens != u.OutputTokens || !stored.CreatedAt.Equal(u.CreatedAt) {
			t.Errorf("%s: stored %+v", u.JobID, stored)
		}
	}

	// The crashed delivery was redelivered and recognized.
	b.mu.Lock()
	got := slices.Clone(b.deliveries[crashed])
	b.mu.Unlock()
	if len(got) != 2 || !got[0].inserted || got[0].n != 1 || got[1].inserted || got[1].n < 2 {
		t.Errorf("deliveries of %s: %+v, want a stored first delivery and a deduplicated redelivery", crashed, got)
	}

	// Everything is settled: nothing pending, nothing waiting for an ack.
	cons, err := b.ns.JS.Consumer(ctx, contracts.StreamUsage, DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	billtest.Eventually(t, 10*time.Second, func() (bool, string) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
	})
	logs := b.logs.String()
	for _, want := range []string{"is missing", `published on zl.usage.acme`, "terminating"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not mention %q:\n%s", want, logs)
		}
	}

	// The daily rollups add up to the charges.
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		var diff int
		err := pool.QueryRow(ctx, `
			SELECT count(*) FROM (
				SELECT u.tenant_id, (u.created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS jobs, sum(c.total) AS total,
					sum(u.input_tokens) AS input_tokens
				FROM charges c JOIN usage u USING (tenant_id, job_id) GROUP BY 1, 2
			) want FULL JOIN usage_daily d USING (tenant_id, day)
			WHERE d.jobs IS DISTINCT FROM want.jobs OR d.total IS DISTINCT FROM want.total
			   OR d.input_tokens IS DISTINCT FROM want.input_tokens`).Scan(&diff)
		if err != nil {
			return false, err.Error()
		}
		return diff == 0, fmt.Sprintf("%d tenant-days differ from usage_daily", diff)
	})
	totals, err := DailyTotals(ctx, pool, "acme", "2026-11-01", "2026-12-01")
	if err != nil {
		t.Fatal(err)
	}
	var jobs int64
	for _, d := range totals {
		jobs += d.Jobs
	}
	if jobs != 5 {
		t.Errorf("acme's daily totals count %d jobs, want 5: %+v", jobs, totals)
	}
}

// TestIngestSameJobIDTwoTenants: job ids are unique per tenant only. Two
// tenants' records of job "BATCH1-line7" are both stored, rated, rolled up
// and reported, each once and under its own tenant; a redelivery of one and
// a second record of the other (published by a worker of before the
// "<tenant>/<job_id>" message ids, so JetStream cannot drop it) are not
// billed again.
func TestIngestSameJobIDTwoTenants(t *testing.T) {
	t.Parallel()
	const id = "BATCH1-line7"
	b := setupIngest(t, jobKey("beta", id))
	ctx := t.Context()
	pool := b.svc.cfg.DB

	day := time.Date(2026, 11, 7, 9, 0, 0, 0, time.UTC)
	acme := billtest.Usage(id, "acme", "stories260K", day, 100, 250, 60, 2.5, 0.97)
	beta := billtest.Usage(id, "beta", "stories260K", day.Add(time.Hour), 40, 10, 5, 0, 0.5)
	for _, u := range []*contracts.Usage{&acme, &beta} {
		u.BatchID, u.CustomID = "BATCH1", "line7"
	}
	for _, u := range []contracts.Usage{acme, beta} {
		if !b.publish(t, u.Tenant, u.Tenant+"/"+u.JobID, billtest.MustJSON(t, u)) {
			t.Fatalf("%s's %s deduplicated by JetStream", u.Tenant, u.JobID)
		}
	}
	// Within the duplicate window JetStream drops the same message id.
	if b.publish(t, "beta", "beta/"+id, billtest.MustJSON(t, beta)) {
		t.Error("JetStream stored a second message with the same Nats-Msg-Id")
	}
	// acme's job republished by a later attempt, under the bare job id:
	// JetStream stores it, billing must recognize the job.
	again := acme
	again.Attempt, again.OutputTokens = 2, 999_999
	if !b.publish(t, "acme", id, billtest.MustJSON(t, again)) {
		t.Fatal("second record deduplicated by JetStream")
	}

	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		s := b.svc.Ingester().Stats()
		// Duplicates: acme's second record and beta's redelivery.
		return s.Stored == 2 && s.Duplicates == 2 && s.Terminated == 0, fmt.Sprintf("stats %+v", s)
	})
	b.mu.Lock()
	got := slices.Clone(b.deliveries[jobKey("beta", id)])
	b.mu.Unlock()
	if len(got) != 2 || !got[0].inserted || got[0].n != 1 || got[1].inserted || got[1].n < 2 {
		t.Errorf("deliveries of beta's %s: %+v, want a stored first delivery and a deduplicated redelivery", id, got)
	}
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		n := b.count(t, "SELECT count(*) FROM charges")
		return n == 2, fmt.Sprintf("%d charges", n)
	})
	if n := b.count(t, "SELECT count(*) FROM usage WHERE job_id = $1", id); n != 2 {
		t.Errorf("%d usage rows of %s, want 2", n, id)
	}
	if n := b.count(t, "SELECT count(*) FROM river_job WHERE kind = $1", RateArgs{}.Kind()); n != 2 {
		t.Errorf("%d rating jobs, want 2", n)
	}

	for _, u := range []contracts.Usage{acme, beta} {
		stored, err := GetUsage(ctx, pool, u.Tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Tenant != u.Tenant || stored.OutputTokens != u.OutputTokens || stored.Attempt != 1 {
			t.Errorf("%s: stored %+v, want %+v", u.Tenant, stored, u)
		}
		c, err := GetCharge(ctx, pool, u.Tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := billtest.DefaultHandCost(u); c.Tenant != u.Tenant || c.JobID != id || c.Revision != 1 || !c.Cost.Equal(want) {
			t.Errorf("%s: charge %+v, want cost %+v", u.Tenant, c, want)
		}

		// Each tenant's daily totals and batch count its job once (and so
		// do its reports: finance's TestReportSameJobIDTwoTenants).
		billtest.Eventually(t, 20*time.Second, func() (bool, string) {
			daily, err := DailyTotals(ctx, pool, u.Tenant, "2026-11-07", "2026-11-08")
			if err != nil {
				return false, err.Error()
			}
			batches, err := BatchTotals(ctx, pool, u.Tenant)
			if err != nil {
				return false, err.Error()
			}
			want := billtest.DefaultHandCost(u).Total
			return len(daily) == 1 && daily[0].Jobs == 1 && daily[0].Cost.Total.Equal(want) &&
					len(batches) == 1 && batches[0].Jobs == 1 && batches[0].Cost.Total.Equal(want),
				fmt.Sprintf("%s: daily %+v, batches %+v", u.Tenant, daily, batches)
		})
	}
}

func TestIngesterLifecycle(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	ctx := t.Context()
	svc := b.svc
	// Start twice is one start; Stop twice is one stop.
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Ingester().Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Records published while stopped wait in the stream.
	u := billtest.Usage("while-stopped", "acme", "m", time.Now(), 10, 10, 1, 0, 0.5)
	b.publish(t, "acme", u.JobID, billtest.MustJSON(t, u))
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		n := b.count(t, "SELECT count(*) FROM charges WHERE job_id = $1", u.JobID)
		return n == 1, "not charged"
	})
}

// TestIngesterWaitsForStream starts billing on a server without the
// streams: it waits, and once a worker provisions them a usage record
// published is stored.
func TestIngesterWaitsForStream(t *testing.T) {
	t.Parallel()
	b := startIngest(t, false, IngesterConfig{})
	if !strings.Contains(b.logs.String(), "waiting for it") {
		t.Errorf("no log line about the wait: %s", b.logs)
	}
	if err := contracts.EnsureStreams(t.Context(), b.ns.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	u := billtest.Usage("late-stream", "acme", "m", time.Now(), 10, 10, 1, 0, 0.5)
	b.publish(t, "acme", u.JobID, billtest.MustJSON(t, u))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		return b.svc.Ingester().Stats().Stored == 1, fmt.Sprintf("stats %+v", b.svc.Ingester().Stats())
	})
	if n := strings.Count(b.logs.String(), "waiting for it"); n != 1 {
		t.Errorf("the wait was logged %d times, want once", n)
	}
}

// TestIngesterStopsWhileWaiting stops billing that never saw its stream.
func TestIngesterStopsWhileWaiting(t *testing.T) {
	t.Parallel()
	b := startIngest(t, false, IngesterConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ns.JS.Stream(ctx, contracts.StreamUsage); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("billing without provisioning made its stream: %v", err)
	}
}

// TestIngesterProvisions starts billing, configured to provision, on a
// server without the streams: it creates them and stores a record.
func TestIngesterProvisions(t *testing.T) {
	t.Parallel()
	b := startIngest(t, false, IngesterConfig{Provision: true})
	u := billtest.Usage("provisioned", "acme", "m", time.Now(), 10, 10, 1, 0, 0.5)
	b.publish(t, "acme", u.JobID, billtest.MustJSON(t, u))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		return b.svc.Ingester().Stats().Stored == 1, fmt.Sprintf("stats %+v", b.svc.Ingester().Stats())
	})
}

func TestNewIngesterValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []IngesterConfig{
		{},
		{JetStream: natstest.Run(t).JS},
	} {
		if _, err := NewIngester(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewIngester(%+v): %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := NewService(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewService: %v", err)
	}
	d := IngesterConfig{}.WithDefaults()
	if d.Durable != DefaultDurable || d.AckWait != 30*time.Second || d.BatchSize != 32 || d.MaxAckPending != 256 {
		t.Errorf("defaults %+v", d)
	}
	cc := d.ConsumerConfig()
	if cc.FilterSubject != contracts.SubjectUsageAll || cc.MaxDeliver != -1 || cc.Durable != DefaultDurable {
		t.Errorf("consumer config %+v", cc)
	}
}

func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"23514": true,  // check_violation
		"22003": true,  // numeric_value_out_of_range
		"40001": false, // serialization_failure
		"57P01": false, // admin_shutdown
		"08006": false, // connection_failure
	} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})
		if got := permanent(err); got != want {
			t.Errorf("permanent(%s) = %v, want %v", code, got, want)
		}
	}
	if permanent(context.Canceled) {
		t.Error("a canceled context is permanent")
	}
}

// TestCollector: the Prometheus collector reports the ingester's counts,
// the unrated records and billing's River jobs.
func TestCollector(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	day := time.Date(2026, 11, 6, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		u := billtest.Usage(fmt.Sprintf("col-%d", i), "acme", "stories260K", day, 10, 20, 5, 0, 0.9)
		b.publish(t, "acme", u.JobID, billtest.MustJSON(t, u))
	}
	b.publish(t, "acme", "bad", []byte(`{}`))
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b.svc))
	billtest.Eventually(t, 20*time.Second, func() (bool, string) {
		mfs, err := reg.Gather()
		if err != nil {
			return false, err.Error()
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, l := range m.GetLabel() {
					key += "/" + l.GetValue()
				}
				got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		ok := got["zerolayer_billing_usage_messages_total/stored"] == 3 && got["zerolayer_billing_usage_messages_total/terminated"] == 1 &&
			got["zerolayer_billing_unrated_usage"] == 0 && got["zerolayer_billing_scrape_errors_total"] == 0 && got["zerolayer_billing_db_up"] == 1
		_, hasQueue := got["zerolayer_billing_river_jobs/available"]
		backlog, hasBacklog := got["zerolayer_billing_usage_backlog"]
		return ok && hasQueue && hasBacklog && backlog == 0, fmt.Sprintf("%v", got)
	})
}
