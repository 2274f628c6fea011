package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// tagsOf returns "TAG RULE SOURCE" for each rule of tags list --format json.
func tagsOf(t *testing.T, db string, args ...string) string {
	t.Helper()
	out, _ := runOK(t, db, append([]string{"tags", "list", "--format", "json"}, args...)...)
	var lines []string
	for _, r := range decodeJSON[[]tagRuleJSON](t, out) {
		lines = append(lines, r.Tag+" "+r.Rule+" "+r.Source)
	}
	return strings.Join(lines, "; ")
}

// TestTagsSetListDelete: set replaces a tenant's (or the default) rules of
// a tag, list shows the rules in force with their source, delete brings
// back the default rules; bad rules are usage errors naming the problem.
func TestTagsSetListDelete(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	defaults := "effective_service output_tokens > 200 default; effective_service confidence > 0.95 default; " +
		"embedding embedding_input_tokens > 0 default; " +
		"high_latency_risk time_to_first_token_ms > 50 default; tool_optimization_needed tool_execution_time_ms > 1 default"
	if got := tagsOf(t, db); got != defaults {
		t.Errorf("default rules: %s\nwant %s", got, defaults)
	}
	out, _ := runOK(t, db, "tags", "list")
	for _, want := range []string{"TAG                       RULE                         SOURCE",
		"high_latency_risk         time_to_first_token_ms > 50  default"} {
		if !strings.Contains(out, want) {
			t.Errorf("tags list lacks %q:\n%s", want, out)
		}
	}

	_, errOut := runOK(t, db, "tags", "set", "--tenant", "acme", "high_latency_risk", "time_to_first_token_ms>100")
	if want := "tenant acme: high_latency_risk when time_to_first_token_ms > 100. Charges already rated keep their tags until re-rated"; !strings.Contains(errOut, want) {
		t.Errorf("set stderr %q lacks %q", errOut, want)
	}
	runOK(t, db, "tags", "set", "--tenant", "acme", "effective_service", "output_tokens > 10", "confidence>=0.5")
	want := "effective_service output_tokens > 10 tenant; effective_service confidence >= 0.5 tenant; " +
		"embedding embedding_input_tokens > 0 default; " +
		"high_latency_risk time_to_first_token_ms > 100 tenant; tool_optimization_needed tool_execution_time_ms > 1 default"
	if got := tagsOf(t, db, "--tenant", "acme"); got != want {
		t.Errorf("acme's rules: %s\nwant %s", got, want)
	}
	if out, _ := runOK(t, db, "tags", "list", "--tenant", "acme"); !strings.Contains(out, "time_to_first_token_ms > 100  tenant") {
		t.Errorf("tags list --tenant acme:\n%s", out)
	}
	if got := tagsOf(t, db); got != defaults {
		t.Errorf("a tenant's rules changed the defaults: %s", got)
	}
	if got := tagsOf(t, db, "--tenant", "beta"); got != defaults {
		t.Errorf("beta's rules: %s", got)
	}

	// A new default tag, then deleted.
	runOK(t, db, "tags", "set", "slow_queue", "queue_ms > 100")
	if got := tagsOf(t, db, "--tenant", "beta"); !strings.Contains(got, "slow_queue queue_ms > 100 default") {
		t.Errorf("new default tag missing: %s", got)
	}
	if _, errOut := runOK(t, db, "tags", "delete", "slow_queue"); !strings.Contains(errOut, "default rules: rules of slow_queue deleted; no job gets it") {
		t.Errorf("delete slow_queue: %q", errOut)
	}
	if got := tagsOf(t, db); got != defaults {
		t.Errorf("after deleting slow_queue: %s", got)
	}

	_, errOut = runOK(t, db, "tags", "delete", "--tenant", "acme", "high_latency_risk")
	if want := "tenant acme: rules of high_latency_risk deleted; the default rules apply: time_to_first_token_ms > 50"; !strings.Contains(errOut, want) {
		t.Errorf("delete stderr %q lacks %q", errOut, want)
	}
	if got := tagsOf(t, db, "--tenant", "acme"); !strings.Contains(got, "high_latency_risk time_to_first_token_ms > 50 default") {
		t.Errorf("after delete, acme's rules: %s", got)
	}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"set", "--tenant", "acme", "high_latency_risk", "ttft>50"}, 2,
			`unknown metric "ttft"; the metrics are input_tokens, output_tokens, cached_input_tokens, queue_ms, time_to_first_token_ms`},
		{[]string{"set", "high_latency_risk", "confidence => 0.9"}, 2, `unknown comparison "=>"; use >, >=, <, <= or =`},
		{[]string{"set", "high_latency_risk", "confidence > lots"}, 2, `threshold "lots" is not a decimal`},
		{[]string{"set", "High-Latency", "confidence > 0.9"}, 2, "must be 1–63 lower-case letters"},
		{[]string{"set", "high_latency_risk"}, 2, "give a tag and at least one rule"},
		{[]string{"delete", "--tenant", "acme", "high_latency_risk"}, 1, `tenant acme: no rules of tag "high_latency_risk" to delete`},
		{[]string{"delete"}, 2, "give one tag"},
		{[]string{"list", "--format", "html"}, 2, "want table or json"},
	} {
		code, out, errOut := runCLI(append(append([]string{"tags"}, tt.args...), "--database-url", db)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
	if got := tagsOf(t, db, "--tenant", "acme"); !strings.Contains(got, "high_latency_risk time_to_first_token_ms > 50 default") {
		t.Errorf("a bad set changed the rules: %s", got)
	}
}

// storeUsage stores u as the usage record of its job, as the ingester
// does (the columns tags test does not read included).
func storeUsage(t *testing.T, pool *pgxpool.Pool, u contracts.Usage) {
	t.Helper()
	ctx := context.Background()
	raw, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.EnsureTenant(ctx, pool, u.Tenant, ""); err != nil {
		t.Fatal(err)
	}
	ms := func(f float64) decimal.Decimal { return price.FloatDecimal(f) }
	if _, err := pool.Exec(ctx, `INSERT INTO usage (job_id, tenant_id, model, priority, bucket, status,
			input_tokens, output_tokens, cached_input_tokens, queue_ms, time_to_first_token_ms, time_per_token_ms,
			inter_token_ms_p50, inter_token_ms_p99, total_ms, tool_execution_time_ms, memory_allocated_mb,
			preemptions, recomputed_tokens, attempt, trace_id, worker_id, device, confidence, created_at, finished_at, raw)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)`,
		u.JobID, u.Tenant, u.Model, string(u.Priority), string(u.Bucket), string(u.Status),
		u.InputTokens, u.OutputTokens, u.CachedInputTokens, ms(u.QueueMs), ms(u.TimeToFirstTokenMs), ms(u.TimePerTokenMs),
		ms(u.InterTokenMsP50), ms(u.InterTokenMsP99), ms(u.TotalMs), ms(u.ToolExecutionTimeMs), ms(u.MemoryAllocatedMB),
		u.Preemptions, u.RecomputedTokens, u.Attempt, u.TraceID, u.WorkerID, u.Device, ms(u.Confidence), u.CreatedAt, u.FinishedAt, raw); err != nil {
		t.Fatal(err)
	}
}

// testUsage returns contracts' usage record fixture as tenant's job id,
// its time to first token ttft.
func testUsage(t *testing.T, tenant, id string, ttft float64) contracts.Usage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "contracts", "testdata", "usage.json"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := contracts.DecodeUsage(data)
	if err != nil {
		t.Fatal(err)
	}
	u.Tenant, u.JobID, u.TimeToFirstTokenMs = tenant, id, ttft
	return u
}

// TestTagsTest: a stored job whose time to first token is 60 ms gets
// high_latency_risk under the default rules, and no longer once the
// tenant's rule asks for more than 100 ms; --usage reads a record from a
// file the same way.
func TestTagsTest(t *testing.T) {
	pool := dbtest.Pool(t)
	db := schemaURL(t, pool)
	u := testUsage(t, "acme", "j1", 60)
	storeUsage(t, pool, u)
	file := filepath.Join(t.TempDir(), "usage.json")
	raw, _ := json.Marshal(u)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	out, errOut := runOK(t, db, "tags", "test", "--tenant", "acme", "--job", "j1")
	for _, want := range []string{"TAG                       RULE                         SOURCE   VALUE  HOLDS",
		"high_latency_risk         time_to_first_token_ms > 50  default  60     yes",
		"effective_service         output_tokens > 200          default  47     no",
		"effective_service         confidence > 0.95            default  0.962  yes",
		"tool_optimization_needed  tool_execution_time_ms > 1   default  0.875  no",
		"\ntags: high_latency_risk\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("tags test lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "keeps the tags it was rated with until re-rated") {
		t.Errorf("tags test stderr %q", errOut)
	}
	if fromFile, _ := runOK(t, db, "tags", "test", "--usage", file); fromFile != out {
		t.Errorf("--usage:\n%s\nwant\n%s", fromFile, out)
	}

	runOK(t, db, "tags", "set", "--tenant", "acme", "high_latency_risk", "time_to_first_token_ms>100")
	out, _ = runOK(t, db, "tags", "test", "--tenant", "acme", "--job", "j1")
	for _, want := range []string{"high_latency_risk         time_to_first_token_ms > 100  tenant   60     no", "\ntags: none\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("after set, tags test lacks %q:\n%s", want, out)
		}
	}
	out, _ = runOK(t, db, "tags", "test", "--usage", file, "--format", "json")
	type ruleResult struct {
		Tag, Rule, Source, Value string
		Holds                    bool
	}
	res := decodeJSON[struct {
		Tenant string       `json:"tenant"`
		JobID  string       `json:"job_id"`
		Rules  []ruleResult `json:"rules"`
		Tags   []string     `json:"tags"`
	}](t, out)
	if res.Tenant != "acme" || res.JobID != "j1" || len(res.Tags) != 0 || len(res.Rules) != 5 ||
		res.Rules[3].Tag != "high_latency_risk" || res.Rules[3].Value != "60" || res.Rules[3].Holds || res.Rules[3].Source != "tenant" ||
		res.Rules[2].Tag != "embedding" || res.Rules[2].Value != "0" || res.Rules[2].Holds {
		t.Errorf("json: %+v", res)
	}
	// Another tenant's rules, for the same record.
	if out, _ := runOK(t, db, "tags", "test", "--usage", file, "--tenant", "beta"); !strings.Contains(out, "tags: high_latency_risk") {
		t.Errorf("--tenant beta:\n%s", out)
	}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tenant", "acme", "--job", "j2"}, 1, "not found"},
		{[]string{"--job", "j1"}, 2, "--job needs --tenant"},
		{[]string{"--tenant", "acme"}, 2, "give one of --job ID (with --tenant) or --usage FILE"},
		{[]string{"--tenant", "acme", "--job", "j1", "--usage", file}, 2, "give one of"},
		{[]string{"--usage", filepath.Join(t.TempDir(), "none.json")}, 1, "read --usage"},
	} {
		code, out, errOut := runCLI(append(append([]string{"tags", "test"}, tt.args...), "--database-url", db)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
}

// TestTenantBilling: set-billing stores what its flags give and keeps the
// rest; billing shows it; bad values exit non-zero.
func TestTenantBilling(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	runOK(t, db, "tenants", "set-billing", "acme", "--name", "Acme Ltd", "--address", `1 Main St\nSpringfield`,
		"--email", "ap@acme.test", "--tax-id", "GB123", "--tax-rate", "0.2", "--terms-days", "14")
	out, _ := runOK(t, db, "tenants", "billing", "acme", "--format", "json")
	b := decodeJSON[finance.TenantBilling](t, out)
	if b.Tenant != "acme" || b.Customer.Name != "Acme Ltd" || b.Customer.Address != "1 Main St\nSpringfield" || b.Customer.Email != "ap@acme.test" ||
		b.Customer.TaxID != "GB123" || !b.TaxRate.Equal(decimal.RequireFromString("0.2")) || b.PaymentTermsDays != 14 {
		t.Errorf("billing: %+v", b)
	}
	out, _ = runOK(t, db, "tenants", "set-billing", "acme", "--email", "billing@acme.test", "--terms-days", "0")
	for _, want := range []string{"TENANT        acme", "NAME          Acme Ltd", "ADDRESS       1 Main St\n              Springfield", "EMAIL         billing@acme.test",
		"TAX ID        GB123", "TAX RATE      0.2", "TAX ROUNDING  per invoice", "TERMS         0 days"} {
		if !strings.Contains(out, want) {
			t.Errorf("set-billing output lacks %q:\n%s", want, out)
		}
	}
	if again, _ := runOK(t, db, "tenants", "billing", "acme"); again != out {
		t.Errorf("billing:\n%s\nwant\n%s", again, out)
	}
	// A new tenant: its id as name, no tax, 30 days.
	out, _ = runOK(t, db, "tenants", "set-billing", "beta", "--email", "b@beta.test", "--format", "json")
	if b := decodeJSON[finance.TenantBilling](t, out); b.Customer.Name != "beta" || !b.TaxRate.IsZero() || b.PaymentTermsDays != 30 || b.Customer.Email != "b@beta.test" {
		t.Errorf("new tenant: %+v", b)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"set-billing", "acme", "--tax-rate", "1.5"}, 1, "tax rate 1.5 is outside [0, 1)"},
		{[]string{"set-billing", "acme", "--tax-rate", "-0.1"}, 1, "outside [0, 1)"},
		{[]string{"set-billing", "acme", "--tax-rate", "twenty"}, 2, "want a decimal such as 0.2"},
		{[]string{"set-billing", "acme", "--terms-days", "400"}, 1, "payment terms of 400 days"},
		{[]string{"set-billing", "acme", "--terms-days", "soon"}, 2, "invalid value"},
		{[]string{"set-billing"}, 2, "give one tenant"},
		{[]string{"billing"}, 2, "give one tenant"},
		{[]string{"billing", "ghost"}, 1, `unknown tenant "ghost"`},
	} {
		code, out, errOut := runCLI(append(append([]string{"tenants"}, tt.args...), "--database-url", db)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tt.args, code, out, errOut, tt.code, tt.want)
		}
	}
}
