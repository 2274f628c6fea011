package migrations_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/migrations"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// ourTables are the tables the zerolayer migrations create.
var ourTables = []string{"tenants", "price_books", "usage", "charges", "charge_history", "value_tag_rules", "usage_daily",
	"invoices", "invoice_lines", "invoice_numbers", "credits", "resource_rates"}

func tables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAllEmbedded(t *testing.T) {
	t.Parallel()
	ms := migrations.All()
	if len(ms) == 0 {
		t.Fatal("no embedded migrations")
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" || m.Up == "" || m.Down == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
	}
}

func TestUpDownUpRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.EmptyPool(t)

	st, err := migrations.Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pending()) != len(migrations.All()) || len(st.RiverApplied) != 0 || st.UpToDate() {
		t.Fatalf("empty schema: status %+v", st)
	}

	up := func() []migrations.Change {
		t.Helper()
		changes, err := migrations.Up(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return changes
	}
	changes := up()
	var ours, river int
	for _, c := range changes {
		if c.Direction != migrations.DirectionUp {
			t.Errorf("change %+v is not up", c)
		}
		switch c.Line {
		case migrations.LineZerolayer:
			ours++
		case migrations.LineRiver:
			river++
		}
	}
	if ours != len(migrations.All()) || river == 0 {
		t.Fatalf("first Up applied %d of ours and %d of River's: %+v", ours, river, changes)
	}
	got := tables(t, pool)
	for _, want := range append(slices.Clone(ourTables), migrations.Table, "river_job", "river_migration") {
		if !slices.Contains(got, want) {
			t.Errorf("after Up, table %s is missing from %v", want, got)
		}
	}
	if again := up(); len(again) != 0 {
		t.Errorf("second Up applied %+v", again)
	}
	st, err = migrations.Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !st.UpToDate() {
		t.Errorf("after Up, status %+v is not up to date", st)
	}

	// One step down reverts the newest migration only.
	last := migrations.All()[len(migrations.All())-1]
	changes, err = migrations.Down(ctx, pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Version != last.Version || changes[0].Direction != migrations.DirectionDown {
		t.Fatalf("Down 1: %+v", changes)
	}
	st, err = migrations.Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Pending(); len(p) != 1 || p[0].Version != last.Version {
		t.Errorf("after Down 1, pending %+v", p)
	}

	// All the way down leaves nothing behind, River's tables included.
	if _, err := migrations.Down(ctx, pool, migrations.AllSteps); err != nil {
		t.Fatal(err)
	}
	if got := tables(t, pool); len(got) != 0 {
		t.Fatalf("after Down AllSteps, tables remain: %v", got)
	}
	if _, err := migrations.Down(ctx, pool, 0); !errors.Is(err, migrations.ErrSteps) {
		t.Errorf("Down 0: %v, want ErrSteps", err)
	}

	// And up again, with the seeds in place.
	up()
	var pIn, pOut, pTTFT, pTool decimal.Decimal
	var currency string
	err = pool.QueryRow(ctx, "SELECT currency, p_in, p_out, p_ttft, p_tool FROM price_books WHERE tenant_id IS NULL AND model IS NULL AND version = 1").
		Scan(&currency, &pIn, &pOut, &pTTFT, &pTool)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  decimal.Decimal
		want string
	}{{"p_in", pIn, "0.000003"}, {"p_out", pOut, "0.000015"}, {"p_ttft", pTTFT, "0.0000002"}, {"p_tool", pTool, "0.0000001"}} {
		if !c.got.Equal(decimal.RequireFromString(c.want)) {
			t.Errorf("default %s = %s, want %s", c.name, c.got, c.want)
		}
	}
	if currency != "USD" {
		t.Errorf("default currency %q", currency)
	}
	var rules int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM value_tag_rules WHERE tenant_id IS NULL").Scan(&rules); err != nil {
		t.Fatal(err)
	}
	// DESIGN.md's three tags (four rules) and, since 0011, embedding.
	if rules != 5 {
		t.Errorf("%d default tag rules, want 5", rules)
	}
}

// TestEmbeddingsMigration: migration 0011 gives the usage rows stored
// before it their kind from their raw body (and the daily rollups their
// embedding tokens), leaves the books without an embedding price (p_in
// then prices embeddings, as before), adds the embedding cost to the
// charges' total check, and seeds the embedding tag; its down migration
// folds the embedding cost back into cost_input.
func TestEmbeddingsMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	must := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	query := func(sql string, dest ...any) {
		t.Helper()
		if err := pool.QueryRow(ctx, sql).Scan(dest...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Back to 0010.
	steps := len(migrations.All()) - 10
	if _, err := migrations.Down(ctx, pool, steps); err != nil {
		t.Fatal(err)
	}
	const insertUsage = `INSERT INTO usage (tenant_id, job_id, model, priority, bucket, status,
		input_tokens, output_tokens, cached_input_tokens, queue_ms, time_to_first_token_ms, time_per_token_ms,
		inter_token_ms_p50, inter_token_ms_p99, total_ms, tool_execution_time_ms, memory_allocated_mb,
		preemptions, recomputed_tokens, attempt, trace_id, worker_id, device, confidence, created_at, finished_at, raw)
		VALUES ('acme', $1, 'm', 'normal', 'short', 'completed', $2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, '', 'w', 'cpu', 0.5,
			'2026-11-02T10:00:00Z', '2026-11-02T10:00:01Z', $3)`
	must(`INSERT INTO tenants (id, name) VALUES ('acme', '')`)
	must(insertUsage, "gen", 100, `{"job_id": "gen"}`)
	must(insertUsage, "emb", 40, `{"job_id": "emb", "kind": "embedding"}`)
	must(`INSERT INTO charges (tenant_id, job_id, model, price_book_id, price_book_version, currency,
		cost_input, cost_output, cost_ttft, cost_tool, total, period)
		SELECT 'acme', job_id, 'm', (SELECT min(id) FROM price_books), 1, 'USD', input_tokens, 0, 0, 0, input_tokens, '2026-11-01'
		FROM usage`)
	must(`INSERT INTO usage_daily (tenant_id, day, currency, jobs, input_tokens, output_tokens, cached_input_tokens,
		cost_input, cost_output, cost_ttft, cost_tool, total) VALUES ('acme', '2026-11-02', 'USD', 2, 140, 0, 0, 140, 0, 0, 0, 140)`)

	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var gen, emb string
	var dailyEmb int64
	var embedIn *decimal.Decimal
	var embedRules int
	query(`SELECT (SELECT kind FROM usage WHERE job_id = 'gen'), (SELECT kind FROM usage WHERE job_id = 'emb'),
		(SELECT embedding_input_tokens FROM usage_daily), (SELECT p_embed_in FROM price_books WHERE id = (SELECT min(id) FROM price_books)),
		(SELECT count(*) FROM value_tag_rules WHERE tenant_id IS NULL AND tag = 'embedding' AND metric = 'embedding_input_tokens')`,
		&gen, &emb, &dailyEmb, &embedIn, &embedRules)
	if gen != "generation" || emb != "embedding" || dailyEmb != 40 || embedIn != nil || embedRules != 1 {
		t.Errorf("after Up: kinds %q and %q, daily embedding tokens %d, p_embed_in %v, %d embedding rules", gen, emb, dailyEmb, embedIn, embedRules)
	}
	// The charge rated before keeps its cost; re-rated, it moves to
	// cost_embedding_input, and the total must count it.
	if _, err := pool.Exec(ctx, `UPDATE charges SET cost_input = 0, cost_embedding_input = 40, total = 0 WHERE job_id = 'emb'`); err == nil {
		t.Error("a total without the embedding cost was stored")
	}
	must(`UPDATE charges SET cost_input = 0, cost_embedding_input = 40 WHERE job_id = 'emb'`)
	if _, err := pool.Exec(ctx, `UPDATE usage SET kind = 'rerank' WHERE job_id = 'emb'`); err == nil {
		t.Error("an unknown kind was stored")
	}

	if _, err := migrations.Down(ctx, pool, 1); err != nil {
		t.Fatal(err)
	}
	var costIn, total decimal.Decimal
	query(`SELECT cost_input, total FROM charges WHERE job_id = 'emb'`, &costIn, &total)
	if !costIn.Equal(decimal.NewFromInt(40)) || !total.Equal(costIn) {
		t.Errorf("after Down: the embedding charge's cost_input %s, total %s; want 40", costIn, total)
	}
	var n int
	query(`SELECT count(*) FROM value_tag_rules WHERE tag = 'embedding'`, &n)
	if n != 0 {
		t.Errorf("after Down: %d embedding tag rules", n)
	}
}

func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	pool := dbtest.EmptyPool(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := migrations.Up(context.Background(), pool)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st, err := migrations.Status(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if !st.UpToDate() {
		t.Errorf("status %+v", st)
	}
}

func TestUnknownAppliedMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, "INSERT INTO "+migrations.Table+" (version, name) VALUES (9999, 'from_the_future')"); err != nil {
		t.Fatal(err)
	}
	st, err := migrations.Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	lastState := st.Migrations[len(st.Migrations)-1]
	if lastState.Version != 9999 || lastState.Known || !lastState.Applied {
		t.Errorf("status of the unknown migration: %+v", lastState)
	}
	if _, err := migrations.Down(ctx, pool, 1); !errors.Is(err, migrations.ErrUnknownMigration) {
		t.Errorf("Down over an unknown migration: %v, want ErrUnknownMigration", err)
	}
}

func TestDBTestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := dbtest.Pool(t), dbtest.Pool(t)
	if _, err := a.Exec(t.Context(), "INSERT INTO tenants (id, name) VALUES ('only-in-a', 'A')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(t.Context(), "SELECT count(*) FROM tenants").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema b sees %d tenants of schema a", n)
	}
}

// TestTenantJobKeyMigration: migration 0007 keys usage, charges and
// charge_history by (tenant_id, job_id), keeping the rows stored before
// it and giving pending rating jobs their tenant; its down migration
// reverts it, refusing while two tenants share a job id.
func TestTenantJobKeyMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	exec := func(sql string, args ...any) error {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}
	must := func(sql string, args ...any) {
		t.Helper()
		if err := exec(sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	const (
		insertUsage = `INSERT INTO usage (tenant_id, job_id, model, priority, bucket, status,
			input_tokens, output_tokens, cached_input_tokens, queue_ms, time_to_first_token_ms, time_per_token_ms,
			inter_token_ms_p50, inter_token_ms_p99, total_ms, tool_execution_time_ms, memory_allocated_mb,
			preemptions, recomputed_tokens, attempt, trace_id, worker_id, device, confidence, created_at, finished_at, raw)
			VALUES ($1, $2, 'm', 'normal', 'short', 'completed', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, '', 'w', 'cpu', 0.5, now(), now(), '{}')`
		insertCharge = `INSERT INTO charges (tenant_id, job_id, model, price_book_id, price_book_version, currency,
			cost_input, cost_output, cost_ttft, cost_tool, total)
			VALUES ($1, $2, 'm', (SELECT min(id) FROM price_books), 1, 'USD', 1, 0, 0, 0, 1)`
		// After 0009 a charge names its billing period.
		insertChargeNow = `INSERT INTO charges (tenant_id, job_id, model, price_book_id, price_book_version, currency,
			cost_input, cost_output, cost_ttft, cost_tool, total, period)
			VALUES ($1, $2, 'm', (SELECT min(id) FROM price_books), 1, 'USD', 1, 0, 0, 0, 1, date_trunc('month', now())::date)`
	)
	// Back to 0006 (and whatever came after 0007 reverted too).
	steps := len(migrations.All()) - 6
	down := func() error {
		t.Helper()
		_, err := migrations.Down(ctx, pool, steps)
		return err
	}
	if err := down(); err != nil {
		t.Fatal(err)
	}

	// Data of before 0007: job ids globally unique, a re-rated charge, a
	// rating job waiting.
	must(`INSERT INTO tenants (id, name) VALUES ('acme', ''), ('beta', '')`)
	must(insertUsage, "acme", "j1")
	must(insertUsage, "beta", "j2")
	must(insertCharge, "acme", "j1")
	must(insertCharge, "beta", "j2")
	must(`INSERT INTO charge_history (job_id, revision, price_book_id, price_book_version, currency,
		cost_input, cost_output, cost_ttft, cost_tool, total, tags, rated_at)
		SELECT job_id, 1, price_book_id, 1, currency, 2, 0, 0, 0, 2, '{}', now() FROM charges WHERE job_id = 'j1'`)
	must(`INSERT INTO river_job (kind, args, max_attempts, queue) VALUES ('zl_billing_rate', '{"job_id": "j2"}', 25, 'billing')`)

	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM usage JOIN charges USING (tenant_id, job_id)`); n != 2 {
		t.Errorf("after Up: %d charged usage rows, want 2", n)
	}
	if n := count(`SELECT count(*) FROM charge_history WHERE tenant_id = 'acme' AND job_id = 'j1' AND revision = 1`); n != 1 {
		t.Errorf("after Up: acme's charge history is gone (%d rows)", n)
	}
	if n := count(`SELECT count(*) FROM river_job WHERE kind = 'zl_billing_rate' AND args = '{"tenant": "beta", "job_id": "j2"}'`); n != 1 {
		t.Errorf("after Up: the waiting rating job did not get its tenant")
	}
	// Now beta may have a job j1 too, charged and re-rated on its own …
	must(insertUsage, "beta", "j1")
	must(insertChargeNow, "beta", "j1")
	must(`INSERT INTO charge_history (tenant_id, job_id, revision, price_book_id, price_book_version, currency,
		cost_input, cost_output, cost_ttft, cost_tool, total, tags, rated_at)
		SELECT tenant_id, job_id, 1, price_book_id, 1, currency, 2, 0, 0, 0, 2, '{}', now() FROM charges WHERE tenant_id = 'beta' AND job_id = 'j1'`)
	// … but each only once, and a charge only of its own tenant's job.
	for _, sql := range []string{
		`INSERT INTO usage SELECT * FROM usage WHERE tenant_id = 'beta' AND job_id = 'j1'`,
		`INSERT INTO charges SELECT * FROM charges WHERE tenant_id = 'beta' AND job_id = 'j1'`,
		`INSERT INTO charges SELECT job_id, 'acme', model, price_book_id, price_book_version, currency,
			cost_input, cost_output, cost_ttft, cost_tool, total FROM charges WHERE tenant_id = 'beta' AND job_id = 'j2'`,
	} {
		var pe *pgconn.PgError
		if err := exec(sql); !errors.As(err, &pe) || pe.Code[:2] != "23" {
			t.Errorf("%s: %v, want an integrity constraint violation", sql, err)
		}
	}

	// Down refuses while two tenants share j1, and changes nothing.
	var pe *pgconn.PgError
	if err := down(); !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("Down with job j1 in two tenants: %v, want a unique violation", err)
	}
	// (Migrations after 0007 run their own transactions: they may be
	// reverted already.)
	if st, err := migrations.Status(ctx, pool); err != nil || len(st.Migrations) < 7 || !st.Migrations[6].Applied {
		t.Errorf("after a failed Down: %+v, %v", st, err)
	}
	// Without the duplicate it reverts, keeping the rows.
	must(`DELETE FROM usage WHERE tenant_id = 'beta' AND job_id = 'j1'`)
	if err := down(); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM usage JOIN charges USING (job_id)`); n != 2 {
		t.Errorf("after Down: %d charged usage rows, want 2", n)
	}
	if n := count(`SELECT count(*) FROM charge_history WHERE job_id = 'j1' AND revision = 1`); n != 1 {
		t.Errorf("after Down: %d rows of charge history, want 1", n)
	}
	if err := exec(insertUsage, "beta", "j1"); err == nil {
		t.Error("after Down, a second job j1 was stored")
	}
}
