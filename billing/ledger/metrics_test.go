package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// scrape gathers reg into a map of name/label values to value.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
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
	return got
}

// TestCollectorUnratedFromRiver: the unrated records are those the rating
// jobs not finished yet name (one per RateArgs job, the length of a
// RateBatchArgs job's list), not those of a discarded job, which counts
// under its state.
func TestCollectorUnratedFromRiver(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	// Scheduled an hour ahead, so that the running River leaves them alone.
	for _, q := range []string{
		`INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at) VALUES ('zl_billing_rate_batch',
			'{"jobs":[{"tenant":"acme","job_id":"a"},{"tenant":"acme","job_id":"b"},{"tenant":"acme","job_id":"c"}]}', $1, 'scheduled', 25, now() + interval '1 hour')`,
		`INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at) VALUES ('zl_billing_rate',
			'{"tenant":"acme","job_id":"d"}', $1, 'retryable', 25, now() + interval '1 hour')`,
		`INSERT INTO river_job (kind, args, queue, state, max_attempts, finalized_at) VALUES ('zl_billing_rate',
			'{"tenant":"acme","job_id":"e"}', $1, 'discarded', 25, now())`,
	} {
		if _, err := b.svc.cfg.DB.Exec(t.Context(), q, RateQueue); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b.svc))
	got := scrape(t, reg)
	for key, want := range map[string]float64{
		"zerolayer_billing_db_up":                1,
		"zerolayer_billing_unrated_usage":        4,
		"zerolayer_billing_river_jobs/scheduled": 1,
		"zerolayer_billing_river_jobs/retryable": 1,
		"zerolayer_billing_river_jobs/discarded": 1,
		"zerolayer_billing_scrape_errors_total":  0,
		"zerolayer_billing_usage_backlog":        0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}

// TestCollectorDatabaseDown: with Postgres unreachable the collector still
// answers, within its timeout: zerolayer_billing_db_up 0, one more scrape
// error, the ingester's counts and the ZL_USAGE backlog (from NATS), and
// no stale database series.
func TestCollectorDatabaseDown(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	// Nothing listens on port 1: every connection is refused.
	dead, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	c := NewCollector(b.svc)
	c.db = dead
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for i := 1; i <= 2; i++ {
		start := time.Now()
		got := scrape(t, reg)
		if d := time.Since(start); d > 2*DefaultStatementTimeout+time.Second {
			t.Errorf("scrape %d took %v", i, d)
		}
		for key, want := range map[string]float64{
			"zerolayer_billing_db_up":                       0,
			"zerolayer_billing_scrape_errors_total":         float64(i),
			"zerolayer_billing_usage_backlog":               0,
			"zerolayer_billing_usage_messages_total/stored": 0,
		} {
			if v, ok := got[key]; !ok || v != want {
				t.Errorf("scrape %d: %s = %v (present %v), want %v", i, key, v, ok, want)
			}
		}
		for _, key := range []string{"zerolayer_billing_unrated_usage", "zerolayer_billing_river_jobs/available"} {
			if _, ok := got[key]; ok {
				t.Errorf("scrape %d: %s exported with the database down", i, key)
			}
		}
	}
}

// TestCollectorStatementTimeout: a read blocked in the database (here by a
// lock on river_job) ends at the statement timeout, and the scrape
// answers with zerolayer_billing_db_up 0 instead of hanging.
func TestCollectorStatementTimeout(t *testing.T) {
	t.Parallel()
	b := setupIngest(t)
	tx, err := b.svc.cfg.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "LOCK TABLE river_job IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(b.svc)
	c.timeout = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	start := time.Now()
	got := scrape(t, reg)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("scrape took %v with river_job locked", d)
	}
	if v := got["zerolayer_billing_db_up"]; v != 0 {
		t.Errorf("zerolayer_billing_db_up = %v with river_job locked, want 0", v)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	got = scrape(t, reg)
	if v := got["zerolayer_billing_db_up"]; v != 1 {
		t.Errorf("zerolayer_billing_db_up = %v after the lock, want 1 (%v)", v, fmt.Sprint(got))
	}
}
