package quota_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/contracts/quota"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func i64(v int64) *int64   { return &v }
func str(s string) *string { return &s }

// limits returns tenant's limits with no limit set, as billing publishes.
func limits(tenant string) contracts.TenantLimits {
	return contracts.TenantLimits{Tenant: tenant, Currency: "USD", Month: "2026-03", MonthToDate: "0", UpdatedAt: t0}
}

func setup(t *testing.T, ls ...contracts.TenantLimits) (*quota.Checker, *clock) {
	t.Helper()
	clk := &clock{t: t0}
	q, err := quota.New(nil, quota.Config{Domain: "test", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		q.Set(l)
	}
	return q, clk
}

// wantCode fails t unless err is a *contracts.Error with code and a
// retry-after of want (-1: any).
func wantCode(t *testing.T, err error, code contracts.Code, want time.Duration) {
	t.Helper()
	var e *contracts.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if want >= 0 && e.RetryAfter() != want {
		t.Errorf("retry after %v, want %v (%s)", e.RetryAfter(), want, e.Message)
	}
}

func TestRequestsPerMinute(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.RequestsPerMinute = i64(3)
	q, clk := setup(t, l)
	for i := range 3 {
		if err := q.Admit("acme", fmt.Sprint("j", i), time.Time{}, 10, 10); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		clk.Add(10 * time.Second)
	}
	// At t0+30s the first job (t0) leaves the window at t0+60s.
	wantCode(t, q.Admit("acme", "j3", time.Time{}, 10, 10), contracts.CodeRateLimited, 30*time.Second)
	if err := q.Admit("other", "x", time.Time{}, 10, 10); err != nil {
		t.Errorf("a tenant without limits: %v", err)
	}
	// The same job again (a retry, a redelivery) counts once.
	if err := q.Admit("acme", "j1", time.Time{}, 10, 10); err != nil {
		t.Errorf("an admitted job again: %v", err)
	}
	clk.Add(30 * time.Second)
	if err := q.Admit("acme", "j3", time.Time{}, 10, 10); err != nil {
		t.Errorf("after the window moved: %v", err)
	}
}

// TestBacklogJudgedBySubmitTime: a worker draining jobs submitted over
// three minutes admits them all, however fast it drains, while a burst
// submitted within one second is cut at the limit.
func TestBacklogJudgedBySubmitTime(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.RequestsPerMinute = i64(60)
	q, clk := setup(t, l)
	clk.Add(10 * time.Minute) // the worker drains long after
	for i := range 180 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := q.Admit("acme", fmt.Sprint("steady", i), at, 1, 1); err != nil {
			t.Fatalf("job submitted at +%ds: %v", i, err)
		}
	}
	burst := t0.Add(5 * time.Minute)
	admitted := 0
	for i := range 100 {
		if q.Admit("acme", fmt.Sprint("burst", i), burst, 1, 1) == nil {
			admitted++
		}
	}
	if admitted != 60 {
		t.Errorf("burst: %d admitted, want 60", admitted)
	}
	// Out of order: a job submitted two minutes before the burst, drained
	// after it, is judged by the windows around its own submit time; one
	// submitted 30 seconds before it would put a window over the limit.
	if err := q.Admit("acme", "late", burst.Add(-2*time.Minute), 1, 1); err != nil {
		t.Errorf("an older job drained late: %v", err)
	}
	wantCode(t, q.Admit("acme", "later", burst.Add(-30*time.Second), 1, 1), contracts.CodeRateLimited, -1)
}

func TestTokensPerMinute(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.TokensPerMinute = i64(100)
	q, clk := setup(t, l)
	if err := q.Admit("acme", "a", time.Time{}, 40, 40); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	wantCode(t, q.Admit("acme", "b", time.Time{}, 10, 20), contracts.CodeRateLimited, 55*time.Second)
	// A job that can never fit says so, with no retry-after.
	wantCode(t, q.Admit("acme", "big", time.Time{}, 100, 1), contracts.CodeRateLimited, 0)
	if err := q.Admit("acme", "c", time.Time{}, 10, 10); err != nil {
		t.Errorf("a job that fits: %v", err)
	}
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.MaxConcurrent = i64(2)
	q, _ := setup(t, l)
	for _, id := range []string{"a", "b"} {
		if err := q.Admit("acme", id, time.Time{}, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, q.Admit("acme", "c", time.Time{}, 1, 1), contracts.CodeConcurrencyLimited, time.Second)
	q.Release("acme", "a")
	q.Release("acme", "a") // twice: no effect
	if err := q.Admit("acme", "c", time.Time{}, 1, 1); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	wantCode(t, q.Admit("acme", "d", time.Time{}, 1, 1), contracts.CodeConcurrencyLimited, -1)
	q.Forget("acme", "c") // its publish failed
	if err := q.Admit("acme", "d", time.Time{}, 1, 1); err != nil {
		t.Fatalf("after a forget: %v", err)
	}
}

func TestSpend(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.MonthlySpend, l.MonthToDate, l.PriceIn, l.PriceOut = str("1.00"), "0.80", "0.01", "0.02"
	q, clk := setup(t, l)
	// 5 prompt tokens × 0.01 + 0 × 0.02 = 0.05 each.
	for _, id := range []string{"a", "b", "c", "d"} {
		if err := q.Admit("acme", id, time.Time{}, 5, 0); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// 0.80 + 0.20 in flight + 0.05 > 1.00: wait for jobs in flight.
	wantCode(t, q.Admit("acme", "e", time.Time{}, 5, 0), contracts.CodeSpendLimitExceeded, 10*time.Second)
	// Released jobs still count until they settle (billing charges them).
	q.Release("acme", "a")
	wantCode(t, q.Admit("acme", "e", time.Time{}, 5, 0), contracts.CodeSpendLimitExceeded, -1)
	clk.Add(31 * time.Second)
	if err := q.Admit("acme", "e", time.Time{}, 5, 0); err != nil {
		t.Fatalf("after a job settled: %v", err)
	}
	// Charges alone over the limit: wait for the next month.
	l.MonthToDate = "0.99"
	q.Set(l)
	wantCode(t, q.Admit("acme", "f", time.Time{}, 1, 1), contracts.CodeSpendLimitExceeded,
		time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Sub(clk.Now()))
	// A new month starts from zero before billing publishes it.
	clk.Add(30 * 24 * time.Hour)
	if err := q.Admit("acme", "g", time.Time{}, 1, 1); err != nil {
		t.Errorf("in the next month: %v", err)
	}
}

// TestSpendEmbedding: a job of no output tokens (an embedding job) is
// estimated at the embedding price, PriceIn when the limits carry none.
func TestSpendEmbedding(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.MonthlySpend, l.MonthToDate, l.PriceIn, l.PriceOut, l.PriceEmbedIn = str("1.00"), "0.80", "0.01", "0.02", "0.001"
	q, _ := setup(t, l)
	// 100 input tokens × 0.001 = 0.10 each: two fit under 1.00, not three.
	for _, id := range []string{"a", "b"} {
		if err := q.Admit("acme", id, time.Time{}, 100, 0); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	wantCode(t, q.Admit("acme", "c", time.Time{}, 100, 0), contracts.CodeSpendLimitExceeded, 10*time.Second)
	// At PriceIn (none of its own), 100 tokens are 1.00: refused alone.
	l.PriceEmbedIn = ""
	q2, _ := setup(t, l)
	wantCode(t, q2.Admit("acme", "a", time.Time{}, 100, 0), contracts.CodeSpendLimitExceeded, -1)
	if err := q2.Admit("acme", "b", time.Time{}, 10, 0); err != nil {
		t.Errorf("10 tokens at PriceIn (0.10): %v", err)
	}
}

func TestZeroLimitAdmitsNothing(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.RequestsPerMinute = i64(0)
	q, _ := setup(t, l)
	wantCode(t, q.Admit("acme", "a", time.Time{}, 1, 1), contracts.CodeRateLimited, time.Minute)
	q.Clear("acme")
	if err := q.Admit("acme", "a", time.Time{}, 1, 1); err != nil {
		t.Errorf("after Clear: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	l := limits("acme")
	l.RequestsPerMinute, l.MaxConcurrent = i64(1), i64(5)
	q, _ := setup(t, l)
	reg := prometheus.NewRegistry()
	if err := q.Register(reg); err != nil {
		t.Fatal(err)
	}
	q.Admit("acme", "a", time.Time{}, 1, 1)
	q.Admit("acme", "b", time.Time{}, 1, 1)
	want := `
# HELP zerolayer_quota_refusals_total Jobs refused for a tenant limit, by admitter (domain: gateway, worker), tenant, error code and limit.
# TYPE zerolayer_quota_refusals_total counter
zerolayer_quota_refusals_total{code="rate_limited",domain="test",limit="requests_per_minute",tenant="acme"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "zerolayer_quota_refusals_total"); err != nil {
		t.Error(err)
	}
	got, err := testutil.GatherAndCount(reg, "zerolayer_quota_usage", "zerolayer_quota_limit")
	if err != nil || got != 6 { // 4 usages + 2 limits
		t.Errorf("gauges: %d series, %v", got, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "zerolayer_quota_usage" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "limit" && lp.GetValue() == quota.LimitConcurrency && m.GetGauge().GetValue() != 1 {
					t.Errorf("jobs in flight = %v, want 1", m.GetGauge().GetValue())
				}
			}
		}
	}
}

// TestFollowsBucket: a started Checker applies ZL_LIMITS as billing
// writes it: at start, on change, on delete.
func TestFollowsBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	ctx := context.Background()
	if err := contracts.EnsureStreams(ctx, srv.JS, contracts.StreamsConfig{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	kv, err := srv.JS.KeyValue(ctx, contracts.TenantLimitsBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(l contracts.TenantLimits) {
		b, _ := json.Marshal(l)
		if _, err := kv.Put(ctx, l.Tenant, b); err != nil {
			t.Fatal(err)
		}
	}
	l := limits("acme")
	l.MaxConcurrent = i64(0)
	put(l)
	q, err := quota.New(srv.Conn, quota.Config{ReleaseOnResults: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer q.Stop(ctx)
	wantCode(t, q.Admit("acme", "a", time.Time{}, 1, 1), contracts.CodeConcurrencyLimited, -1)
	l.MaxConcurrent = i64(1)
	put(l)
	natstest.Until(t, 10*time.Second, "the new limit applied", func() bool { return q.Admit("acme", "a", time.Time{}, 1, 1) == nil })
	wantCode(t, q.Admit("acme", "b", time.Time{}, 1, 1), contracts.CodeConcurrencyLimited, -1)
	// The job's result releases it.
	res, _ := json.Marshal(contracts.Result{JobID: "a", Tenant: "acme", Status: contracts.StatusCompleted})
	if err := srv.Conn.Publish(contracts.ResultsSubject("acme", "a"), res); err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 10*time.Second, "the result released the job", func() bool { return q.Admit("acme", "b", time.Time{}, 1, 1) == nil })
	if err := kv.Delete(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 10*time.Second, "the deleted limits cleared", func() bool { return q.Admit("acme", "c", time.Time{}, 1, 1) == nil })
	// A malformed value keeps the previous limits.
	if _, err := kv.Put(ctx, "acme", []byte(`{"tenant":"acme"}`)); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestStartWithoutBucket: with no ZL_LIMITS yet, Start succeeds and
// everything is admitted.
func TestStartWithoutBucket(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
	q, err := quota.New(srv.Conn, quota.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Admit("acme", "a", time.Time{}, 1, 1); err != nil {
		t.Error(err)
	}
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
