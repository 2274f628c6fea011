package ledger

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// Metric names a usage field a value-tag rule tests. The names are the
// JSON field names of contracts.Usage, but for embedding_input_tokens,
// which is drawn from two of them.
type Metric string

// The metrics a rule may test.
const (
	MetricInputTokens         Metric = "input_tokens"
	MetricOutputTokens        Metric = "output_tokens"
	MetricCachedInputTokens   Metric = "cached_input_tokens"
	MetricQueueMs             Metric = "queue_ms"
	MetricTimeToFirstTokenMs  Metric = "time_to_first_token_ms"
	MetricTimePerTokenMs      Metric = "time_per_token_ms"
	MetricInterTokenMsP50     Metric = "inter_token_ms_p50"
	MetricInterTokenMsP99     Metric = "inter_token_ms_p99"
	MetricTotalMs             Metric = "total_ms"
	MetricToolExecutionTimeMs Metric = "tool_execution_time_ms"
	MetricMemoryAllocatedMB   Metric = "memory_allocated_mb"
	MetricPreemptions         Metric = "preemptions"
	MetricRecomputedTokens    Metric = "recomputed_tokens"
	MetricConfidence          Metric = "confidence"
	// MetricEmbeddingInputTokens is an embedding job's input_tokens
	// (usage kind embedding), 0 for a generation: a rule on it, alone or
	// beside others of its tag, picks out embedding jobs.
	MetricEmbeddingInputTokens Metric = "embedding_input_tokens"
)

// Metrics returns every metric a rule may test, in the order of the
// fields of contracts.Usage, then embedding_input_tokens.
func Metrics() []Metric {
	return []Metric{
		MetricInputTokens, MetricOutputTokens, MetricCachedInputTokens,
		MetricQueueMs, MetricTimeToFirstTokenMs, MetricTimePerTokenMs, MetricInterTokenMsP50, MetricInterTokenMsP99,
		MetricTotalMs, MetricToolExecutionTimeMs, MetricMemoryAllocatedMB,
		MetricPreemptions, MetricRecomputedTokens, MetricConfidence,
		MetricEmbeddingInputTokens,
	}
}

// Value returns the metric's value in u, exactly (timings through
// price.FloatDecimal), and false for an unknown metric.
func (m Metric) Value(u contracts.Usage) (decimal.Decimal, bool) {
	i := func(n int) (decimal.Decimal, bool) { return decimal.NewFromInt(int64(n)), true }
	f := func(x float64) (decimal.Decimal, bool) { return price.FloatDecimal(x), true }
	switch m {
	case MetricInputTokens:
		return i(u.InputTokens)
	case MetricOutputTokens:
		return i(u.OutputTokens)
	case MetricCachedInputTokens:
		return i(u.CachedInputTokens)
	case MetricQueueMs:
		return f(u.QueueMs)
	case MetricTimeToFirstTokenMs:
		return f(u.TimeToFirstTokenMs)
	case MetricTimePerTokenMs:
		return f(u.TimePerTokenMs)
	case MetricInterTokenMsP50:
		return f(u.InterTokenMsP50)
	case MetricInterTokenMsP99:
		return f(u.InterTokenMsP99)
	case MetricTotalMs:
		return f(u.TotalMs)
	case MetricToolExecutionTimeMs:
		return f(u.ToolExecutionTimeMs)
	case MetricMemoryAllocatedMB:
		return f(u.MemoryAllocatedMB)
	case MetricPreemptions:
		return i(u.Preemptions)
	case MetricRecomputedTokens:
		return i(u.RecomputedTokens)
	case MetricConfidence:
		return f(u.Confidence)
	case MetricEmbeddingInputTokens:
		if u.Kind != contracts.KindEmbedding {
			return i(0)
		}
		return i(u.InputTokens)
	}
	return decimal.Decimal{}, false
}

// Op is a comparison of a rule: metric Op threshold.
type Op string

// The comparisons.
const (
	OpGreater      Op = ">"
	OpGreaterEqual Op = ">="
	OpLess         Op = "<"
	OpLessEqual    Op = "<="
	OpEqual        Op = "="
)

// valid reports whether o is one of the comparisons.
func (o Op) valid() bool {
	switch o {
	case OpGreater, OpGreaterEqual, OpLess, OpLessEqual, OpEqual:
		return true
	}
	return false
}

// holds reports whether cmp, the result of value.Cmp(threshold), satisfies
// o.
func (o Op) holds(cmp int) bool {
	switch o {
	case OpGreater:
		return cmp > 0
	case OpGreaterEqual:
		return cmp >= 0
	case OpLess:
		return cmp < 0
	case OpLessEqual:
		return cmp <= 0
	case OpEqual:
		return cmp == 0
	}
	return false
}

// TagRule is one condition of a value tag: the tag applies to a job when
// every rule of that tag holds for the job's usage. The three default tags
// are DefaultTagRules; a tenant's rules for a tag replace the default rules
// of that tag (MergeTagRules).
type TagRule struct {
	// Tenant is the tenant the rule is for; empty for a default rule.
	Tenant string `json:"tenant,omitempty"`
	// Tag is the tag's name: lower-case letters, digits and '_'.
	Tag string `json:"tag"`
	// Metric is the usage field tested.
	Metric Metric `json:"metric"`
	// Op compares the field with Threshold.
	Op Op `json:"op"`
	// Threshold is the value compared with, exactly.
	Threshold decimal.Decimal `json:"threshold"`
}

// Condition writes the rule's test as ParseTagRule reads it:
// "time_to_first_token_ms > 50".
func (r TagRule) Condition() string {
	return fmt.Sprintf("%s %s %s", r.Metric, r.Op, r.Threshold)
}

// ruleRE splits a condition into metric, comparison and threshold; the
// comparison is any run of <, >, =, ! so that a wrong one is named.
var ruleRE = regexp.MustCompile(`^\s*([A-Za-z0-9_]*)\s*([<>=!]*)\s*(.*?)\s*$`)

// ParseTagRule reads a rule of tenant's tag from its condition, METRIC OP
// THRESHOLD with optional spaces: "time_to_first_token_ms>50",
// "confidence >= 0.9". OP is one of >, >=, <, <= and =; THRESHOLD a
// decimal. The rule is validated; errors wrap ErrInvalidTagRule and, for
// an unknown metric, list the metrics.
func ParseTagRule(tenant, tag, cond string) (TagRule, error) {
	m := ruleRE.FindStringSubmatch(cond)
	if m == nil || m[1] == "" || m[2] == "" || m[3] == "" {
		return TagRule{}, fmt.Errorf("%w: %q: want METRIC OP THRESHOLD, such as %s>50", ErrInvalidTagRule, cond, MetricTimeToFirstTokenMs)
	}
	r := TagRule{Tenant: tenant, Tag: tag, Metric: Metric(m[1]), Op: Op(m[2])}
	if _, ok := r.Metric.Value(contracts.Usage{}); !ok {
		names := make([]string, 0, len(Metrics()))
		for _, x := range Metrics() {
			names = append(names, string(x))
		}
		return TagRule{}, fmt.Errorf("%w: %q: unknown metric %q; the metrics are %s", ErrInvalidTagRule, cond, r.Metric, strings.Join(names, ", "))
	}
	if !r.Op.valid() {
		return TagRule{}, fmt.Errorf("%w: %q: unknown comparison %q; use >, >=, <, <= or =", ErrInvalidTagRule, cond, r.Op)
	}
	th, err := decimal.NewFromString(m[3])
	if err != nil {
		return TagRule{}, fmt.Errorf("%w: %q: threshold %q is not a decimal number", ErrInvalidTagRule, cond, m[3])
	}
	r.Threshold = th
	if err := r.Validate(); err != nil {
		return TagRule{}, err
	}
	return r, nil
}

var tagRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Validate reports a rule that cannot be used, wrapping ErrInvalidTagRule.
func (r TagRule) Validate() error {
	if !tagRE.MatchString(r.Tag) {
		return fmt.Errorf("%w: tag %q must be 1–63 lower-case letters, digits or '_', starting with a letter", ErrInvalidTagRule, r.Tag)
	}
	if _, ok := r.Metric.Value(contracts.Usage{}); !ok {
		return fmt.Errorf("%w: tag %s: unknown metric %q; use a numeric contracts.Usage field name such as %q", ErrInvalidTagRule, r.Tag, r.Metric, MetricTimeToFirstTokenMs)
	}
	if !r.Op.valid() {
		return fmt.Errorf("%w: tag %s: unknown op %q; use >, >=, <, <= or =", ErrInvalidTagRule, r.Tag, r.Op)
	}
	if r.Tenant != "" {
		if err := contracts.ValidateTenant(r.Tenant); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidTagRule, err)
		}
	}
	return nil
}

// Holds reports whether the rule holds for u. A rule with an unknown metric
// or op never holds.
func (r TagRule) Holds(u contracts.Usage) bool {
	v, ok := r.Metric.Value(u)
	return ok && r.Op.holds(v.Cmp(r.Threshold))
}

// DefaultTagRules returns DESIGN.md's value tags: high_latency_risk when
// time_to_first_token_ms > 50; tool_optimization_needed when
// tool_execution_time_ms > 1.0; effective_service when output_tokens > 200
// and confidence > 0.95; and embedding when embedding_input_tokens > 0 (an
// embedding job, which earns none of the others: it has no first token,
// tools or output). The migrations seed the same rules.
func DefaultTagRules() []TagRule {
	return []TagRule{
		{Tag: "high_latency_risk", Metric: MetricTimeToFirstTokenMs, Op: OpGreater, Threshold: decimal.NewFromInt(50)},
		{Tag: "tool_optimization_needed", Metric: MetricToolExecutionTimeMs, Op: OpGreater, Threshold: decimal.RequireFromString("1.0")},
		{Tag: "effective_service", Metric: MetricOutputTokens, Op: OpGreater, Threshold: decimal.NewFromInt(200)},
		{Tag: "effective_service", Metric: MetricConfidence, Op: OpGreater, Threshold: decimal.RequireFromString("0.95")},
		{Tag: "embedding", Metric: MetricEmbeddingInputTokens, Op: OpGreater, Threshold: decimal.Zero},
	}
}

// Tags returns the tags whose rules all hold for u, sorted and without
// repeats. Rules are used as given: merge tenant and default rules first
// with MergeTagRules.
func Tags(u contracts.Usage, rules []TagRule) []string {
	holds := map[string]bool{}
	for _, r := range rules {
		ok, seen := holds[r.Tag]
		holds[r.Tag] = (ok || !seen) && r.Holds(u)
	}
	out := []string{}
	for tag, ok := range holds {
		if ok {
			out = append(out, tag)
		}
	}
	slices.Sort(out)
	return out
}

// MergeTagRules returns the rules in force for one tenant: the tenant's
// rules, plus the default rules of every tag the tenant has no rule for.
func MergeTagRules(defaults, tenant []TagRule) []TagRule {
	own := map[string]bool{}
	for _, r := range tenant {
		own[r.Tag] = true
	}
	out := slices.Clone(tenant)
	for _, r := range defaults {
		if !own[r.Tag] {
			out = append(out, r)
		}
	}
	return out
}

// LoadTagRules reads the rules in force for tenant from the
// value_tag_rules table: the tenant's, merged over the defaults
// (MergeTagRules).
func LoadTagRules(ctx context.Context, db DB, tenant string) ([]TagRule, error) {
	rules, err := loadTagRules(ctx, db, []string{tenant})
	if err != nil {
		return nil, fmt.Errorf("billing: load tag rules of %s: %w", tenant, err)
	}
	return rules[tenant], nil
}

// loadTagRules is LoadTagRules for many tenants with one query: the rules
// in force for each of tenants.
func loadTagRules(ctx context.Context, db DB, tenants []string) (map[string][]TagRule, error) {
	rows, err := db.Query(ctx, `
		SELECT coalesce(tenant_id, ''), tag, metric, op, threshold
		FROM value_tag_rules
		WHERE tenant_id IS NULL OR tenant_id = ANY($1)
		ORDER BY id`, tenants)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TagRule, error) {
		var r TagRule
		err := row.Scan(&r.Tenant, &r.Tag, &r.Metric, &r.Op, &r.Threshold)
		return r, err
	})
	if err != nil {
		return nil, err
	}
	var defaults []TagRule
	own := map[string][]TagRule{}
	for _, r := range all {
		if r.Tenant == "" {
			defaults = append(defaults, r)
		} else {
			own[r.Tenant] = append(own[r.Tenant], r)
		}
	}
	out := make(map[string][]TagRule, len(tenants))
	for _, t := range tenants {
		out[t] = MergeTagRules(defaults, own[t])
	}
	return out, nil
}

// SetTagRules replaces the rules of one tag for one tenant (or, with tenant
// empty, the default rules of the tag) with rules, which must all be of
// that tag and tenant. Passing no rules deletes the tag's rules; for a
// tenant that means falling back to the default rules. Charges already
// rated keep their tags until re-rated.
func SetTagRules(ctx context.Context, db Beginner, tenant, tag string, rules []TagRule) error {
	for _, r := range rules {
		if r.Tag != tag || r.Tenant != tenant {
			return fmt.Errorf("%w: rule %+v is not of tag %q and tenant %q", ErrInvalidTagRule, r, tag, tenant)
		}
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if tenant != "" {
			if err := EnsureTenant(ctx, tx, tenant, ""); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM value_tag_rules WHERE tag = $1 AND tenant_id IS NOT DISTINCT FROM $2`, tag, nullIfEmpty(tenant)); err != nil {
			return fmt.Errorf("billing: set tag rules: %w", err)
		}
		for _, r := range rules {
			if _, err := tx.Exec(ctx, `INSERT INTO value_tag_rules (tenant_id, tag, metric, op, threshold) VALUES ($1, $2, $3, $4, $5)`,
				nullIfEmpty(tenant), r.Tag, string(r.Metric), string(r.Op), r.Threshold); err != nil {
				return fmt.Errorf("billing: set tag rules: %w", err)
			}
		}
		return nil
	})
}
