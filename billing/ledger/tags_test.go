package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

func TestDefaultTagThresholds(t *testing.T) {
	t.Parallel()
	rules := DefaultTagRules()
	for _, tc := range []struct {
		name string
		u    contracts.Usage
		want []string
	}{
		{"nothing", contracts.Usage{}, []string{}},
		// high_latency_risk: ttft_ms > 50.
		{"ttft below", contracts.Usage{TimeToFirstTokenMs: 49.999}, []string{}},
		{"ttft at", contracts.Usage{TimeToFirstTokenMs: 50}, []string{}},
		{"ttft just above", contracts.Usage{TimeToFirstTokenMs: 50.000001}, []string{"high_latency_risk"}},
		{"ttft above", contracts.Usage{TimeToFirstTokenMs: 51}, []string{"high_latency_risk"}},
		// tool_optimization_needed: tool_ms > 1.0.
		{"tool below", contracts.Usage{ToolExecutionTimeMs: 0.999}, []string{}},
		{"tool at", contracts.Usage{ToolExecutionTimeMs: 1.0}, []string{}},
		{"tool just above", contracts.Usage{ToolExecutionTimeMs: 1.0000001}, []string{"tool_optimization_needed"}},
		// effective_service: output_tokens > 200 and confidence > 0.95.
		{"output at, confidence above", contracts.Usage{OutputTokens: 200, Confidence: 0.99}, []string{}},
		{"output above, confidence at", contracts.Usage{OutputTokens: 201, Confidence: 0.95}, []string{}},
		{"output above, confidence below", contracts.Usage{OutputTokens: 5000, Confidence: 0.9499}, []string{}},
		{"output above, confidence just above", contracts.Usage{OutputTokens: 201, Confidence: 0.9500001}, []string{"effective_service"}},
		{"confidence 1", contracts.Usage{OutputTokens: 201, Confidence: 1}, []string{"effective_service"}},
		{"all three", contracts.Usage{OutputTokens: 300, Confidence: 0.96, TimeToFirstTokenMs: 80, ToolExecutionTimeMs: 2},
			[]string{"effective_service", "high_latency_risk", "tool_optimization_needed"}},
	} {
		if got := Tags(tc.u, rules); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Tags = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTagRuleOps(t *testing.T) {
	t.Parallel()
	u := contracts.Usage{InputTokens: 10}
	for _, tc := range []struct {
		op                 Op
		below, at, overall bool
	}{
		{OpGreater, false, false, true},
		{OpGreaterEqual, false, true, true},
		{OpLess, true, false, false},
		{OpLessEqual, true, true, false},
		{OpEqual, false, true, false},
	} {
		for _, c := range []struct {
			threshold string
			want      bool
		}{{"11", tc.below}, {"10", tc.at}, {"9", tc.overall}} {
			r := TagRule{Tag: "x", Metric: MetricInputTokens, Op: tc.op, Threshold: dec(c.threshold)}
			if got := r.Holds(u); got != c.want {
				t.Errorf("10 %s %s = %v, want %v", tc.op, c.threshold, got, c.want)
			}
		}
	}
}

func TestTagRuleValidate(t *testing.T) {
	t.Parallel()
	ok := TagRule{Tag: "slow_queue", Metric: MetricQueueMs, Op: OpGreaterEqual, Threshold: dec("100")}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []TagRule{
		{Tag: "Bad-Tag", Metric: MetricQueueMs, Op: OpGreater},
		{Tag: "x", Metric: "latency", Op: OpGreater},
		{Tag: "x", Metric: MetricQueueMs, Op: "!="},
		{Tenant: "a.b", Tag: "x", Metric: MetricQueueMs, Op: OpGreater},
	} {
		if err := r.Validate(); !errors.Is(err, ErrInvalidTagRule) {
			t.Errorf("%+v: %v, want ErrInvalidTagRule", r, err)
		}
	}
	// A rule that cannot be evaluated never holds.
	if (TagRule{Tag: "x", Metric: "nope", Op: OpGreater}).Holds(contracts.Usage{}) {
		t.Error("rule with unknown metric holds")
	}
}

func TestMergeTagRules(t *testing.T) {
	t.Parallel()
	own := []TagRule{{Tenant: "acme", Tag: "high_latency_risk", Metric: MetricTimeToFirstTokenMs, Op: OpGreater, Threshold: dec("200")}}
	merged := MergeTagRules(DefaultTagRules(), own)
	u := contracts.Usage{TimeToFirstTokenMs: 120, OutputTokens: 500, Confidence: 0.99}
	// The tenant's threshold replaces the default one; other tags stay.
	if got := Tags(u, merged); !slices.Equal(got, []string{"effective_service"}) {
		t.Errorf("merged tags = %v", got)
	}
	u.TimeToFirstTokenMs = 201
	if got := Tags(u, merged); !slices.Equal(got, []string{"effective_service", "high_latency_risk"}) {
		t.Errorf("merged tags = %v", got)
	}
}

func TestTagRulesInDatabase(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := t.Context()

	// The seeded defaults are DefaultTagRules.
	rules, err := LoadTagRules(ctx, pool, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != len(DefaultTagRules()) {
		t.Fatalf("loaded %+v", rules)
	}
	for i, r := range rules {
		d := DefaultTagRules()[i]
		if r.Tag != d.Tag || r.Metric != d.Metric || r.Op != d.Op || !r.Threshold.Equal(d.Threshold) || r.Tenant != "" {
			t.Errorf("rule %d: %+v, want %+v", i, r, d)
		}
	}

	// acme overrides effective_service; beta keeps the defaults.
	err = SetTagRules(ctx, pool, "acme", "effective_service", []TagRule{
		{Tenant: "acme", Tag: "effective_service", Metric: MetricOutputTokens, Op: OpGreaterEqual, Threshold: dec("50")},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := contracts.Usage{OutputTokens: 50, Confidence: 0.5}
	for tenant, want := range map[string][]string{"acme": {"effective_service"}, "beta": {}} {
		rules, err := LoadTagRules(ctx, pool, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if got := Tags(u, rules); !slices.Equal(got, want) {
			t.Errorf("%s: tags %v, want %v", tenant, got, want)
		}
	}
	// Removing acme's rules falls back to the defaults.
	if err := SetTagRules(ctx, pool, "acme", "effective_service", nil); err != nil {
		t.Fatal(err)
	}
	rules, err = LoadTagRules(ctx, pool, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := Tags(u, rules); len(got) != 0 {
		t.Errorf("after reset: %v", got)
	}
	if err := SetTagRules(ctx, pool, "acme", "x", []TagRule{{Tenant: "acme", Tag: "y", Metric: MetricQueueMs, Op: OpGreater}}); !errors.Is(err, ErrInvalidTagRule) {
		t.Errorf("mismatched tag: %v", err)
	}
}

// TestParseTagRule: conditions with and without spaces read back as the
// rule they write (Condition), every metric is known, and an unknown
// metric, comparison or threshold is an ErrInvalidTagRule naming it.
func TestParseTagRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"time_to_first_token_ms>50", "time_to_first_token_ms > 50"},
		{"confidence >= 0.9", "confidence >= 0.9"},
		{"  output_tokens<=200 ", "output_tokens <= 200"},
		{"preemptions = 0", "preemptions = 0"},
		{"queue_ms<1.5", "queue_ms < 1.5"},
	} {
		r, err := ParseTagRule("acme", "slow", tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := r.Condition(); got != tc.want || r.Tenant != "acme" || r.Tag != "slow" {
			t.Errorf("%q: %+v, condition %q; want %q", tc.in, r, got, tc.want)
		}
		if back, err := ParseTagRule("acme", "slow", r.Condition()); err != nil || back.Condition() != r.Condition() {
			t.Errorf("%q: does not read back: %+v, %v", tc.in, back, err)
		}
	}
	for _, m := range Metrics() {
		if _, err := ParseTagRule("", "t", string(m)+">1"); err != nil {
			t.Errorf("metric %s: %v", m, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"ttft>50", `unknown metric "ttft"; the metrics are input_tokens, `},
		{"confidence => 0.9", `unknown comparison "=>"`},
		{"confidence != 0.9", `unknown comparison "!="`},
		{"confidence 0.9", "want METRIC OP THRESHOLD"},
		{"confidence >", "want METRIC OP THRESHOLD"},
		{"confidence > high", `threshold "high" is not a decimal`},
		{"", "want METRIC OP THRESHOLD"},
	} {
		_, err := ParseTagRule("", "t", tc.in)
		if !errors.Is(err, ErrInvalidTagRule) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want ErrInvalidTagRule with %q", tc.in, err, tc.want)
		}
	}
	if _, err := ParseTagRule("", "Bad-Tag", "confidence>0.9"); !errors.Is(err, ErrInvalidTagRule) {
		t.Errorf("bad tag name: %v", err)
	}
}
