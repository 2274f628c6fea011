package finance

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// OperatorReport is the operator's view over every tenant for the usage
// created in [From, To): per tenant, and per value tag, the revenue (the
// charges) against the resource cost of the jobs, so the operator sees
// which tenants and which traffic carry which. The resource cost of a job
// is
//
//	total_ms × engine_ms + memory_allocated_mb × total_ms × kv_mib_ms
//	  + tool_execution_time_ms × tool_ms
//
// with the resource rates (table resource_rates) in force at its
// created_at: the engine time it held, the KV memory it held for that
// time, and its tool time.
type OperatorReport struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Tenants has one row per tenant and currency, largest revenue first.
	Tenants []Margin `json:"tenants"`
	// Tags has one row per value tag and currency (a job with several tags
	// counts in each), then "(no tag)".
	Tags []Margin `json:"tags"`
	// Total sums the tenants per currency.
	Total []Margin `json:"total"`
}

// Margin is revenue against resource cost for one group of jobs.
type Margin struct {
	// Key is the tenant or tag.
	Key      string `json:"key"`
	Currency string `json:"currency"`
	Jobs     int64  `json:"jobs"`
	// EngineMs, KVMiBMs and ToolMs are the resources the jobs held.
	EngineMs decimal.Decimal `json:"engine_ms"`
	KVMiBMs  decimal.Decimal `json:"kv_mib_ms"`
	ToolMs   decimal.Decimal `json:"tool_ms"`
	// Revenue is the jobs' charges; Cost their resource cost; Margin the
	// difference; both exact.
	Revenue decimal.Decimal `json:"revenue_exact"`
	Cost    decimal.Decimal `json:"cost_exact"`
	Margin  decimal.Decimal `json:"margin_exact"`
}

// MarginPercent is Margin as a percentage of Revenue, to one decimal ("-"
// without revenue).
func (m Margin) MarginPercent() string {
	if m.Revenue.IsZero() {
		return "-"
	}
	return m.Margin.Div(m.Revenue).Mul(decimal.NewFromInt(100)).StringFixed(1) + "%"
}

// operatorJobs is every rated job of [$1, $2) with its resource cost.
const operatorJobs = `
	SELECT u.tenant_id, c.currency, c.total, c.tags, u.total_ms AS engine_ms, u.memory_allocated_mb * u.total_ms AS kv_mib_ms,
		u.tool_execution_time_ms AS tool_ms,
		coalesce(u.total_ms * rr.engine_ms + u.memory_allocated_mb * u.total_ms * rr.kv_mib_ms + u.tool_execution_time_ms * rr.tool_ms, 0) AS cost
	FROM charges c JOIN usage u USING (tenant_id, job_id)
	LEFT JOIN LATERAL (SELECT * FROM resource_rates r WHERE r.effective_at <= u.created_at AND r.currency = c.currency
		ORDER BY r.effective_at DESC, r.id DESC LIMIT 1) rr ON true
	WHERE u.created_at >= $1 AND u.created_at < $2`

const marginColumns = `count(*), sum(j.engine_ms), sum(j.kv_mib_ms), sum(j.tool_ms), sum(j.total), sum(j.cost)`

// BuildOperatorReport reads the operator's report of [from, to) from db.
func BuildOperatorReport(ctx context.Context, db DB, from, to time.Time) (*OperatorReport, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: the report period [%s, %s) is empty", ledger.ErrInvalidPeriod, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	r := &OperatorReport{From: from.UTC(), To: to.UTC()}
	for _, q := range []struct {
		dst *[]Margin
		sql string
	}{
		{&r.Tenants, `SELECT j.tenant_id, j.currency, ` + marginColumns + ` FROM (` + operatorJobs + `) j GROUP BY 1, 2 ORDER BY 7 DESC, 1`},
		{&r.Tags, `SELECT coalesce(t.tag, '(no tag)'), j.currency, ` + marginColumns + ` FROM (` + operatorJobs + `) j
			LEFT JOIN LATERAL unnest(j.tags) AS t(tag) ON true GROUP BY 1, 2 ORDER BY coalesce(t.tag, '(no tag)') = '(no tag)', 7 DESC, 1`},
		{&r.Total, `SELECT 'total', j.currency, ` + marginColumns + ` FROM (` + operatorJobs + `) j GROUP BY 2 ORDER BY 2`},
	} {
		rows, err := db.Query(ctx, q.sql, from, to)
		if err != nil {
			return nil, fmt.Errorf("billing: operator report: %w", err)
		}
		ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Margin, error) {
			var m Margin
			err := row.Scan(&m.Key, &m.Currency, &m.Jobs, &m.EngineMs, &m.KVMiBMs, &m.ToolMs, &m.Revenue, &m.Cost)
			m.Margin = m.Revenue.Sub(m.Cost)
			return m, err
		})
		if err != nil {
			return nil, fmt.Errorf("billing: operator report: %w", err)
		}
		*q.dst = ms
	}
	return r, nil
}

// Write writes r as a table (amounts rounded for display), CSV (one view:
// tenants, then its total rows; exact amounts) or JSON.
func (r *OperatorReport) Write(w io.Writer, f Format) error {
	switch f {
	case FormatJSON:
		return writeIndentedJSON(w, r)
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write([]string{"from", "to", "view", "key", "currency", "jobs", "engine_ms", "kv_mib_ms", "tool_ms",
			"revenue_exact", "resource_cost_exact", "margin_exact", "margin_percent"})
		for _, s := range []struct {
			view string
			ms   []Margin
		}{{"tenant", r.Tenants}, {"tenant", r.Total}} {
			for _, m := range s.ms {
				cw.Write([]string{r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), s.view, m.Key, m.Currency, itoa(m.Jobs),
					m.EngineMs.String(), m.KVMiBMs.String(), m.ToolMs.String(), m.Revenue.String(), m.Cost.String(), m.Margin.String(),
					m.MarginPercent()})
			}
		}
		cw.Flush()
		return cw.Error()
	case FormatTable:
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "all tenants, usage from %s to %s (created_at, end excluded)\n", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
		fmt.Fprintf(tw, "revenue is what the tenants are charged; resource cost is engine time, KV memory held and tool time at the resource rates\n")
		fmt.Fprintf(tw, "amounts are rounded half to even at the minor unit per row; the total rows add up the tenant rows as printed\n")
		// The totals of the rounded tenant rows, so that the printed
		// column adds up.
		var totals []Margin
		for _, t := range r.Total {
			sum := Margin{Key: t.Key, Currency: t.Currency, Jobs: t.Jobs, EngineMs: t.EngineMs}
			for _, m := range r.Tenants {
				if m.Currency == t.Currency {
					sum.Revenue = sum.Revenue.Add(price.RoundInvoice(m.Revenue, m.Currency))
					sum.Cost = sum.Cost.Add(price.RoundInvoice(m.Cost, m.Currency))
				}
			}
			sum.Margin = sum.Revenue.Sub(sum.Cost)
			totals = append(totals, sum)
		}
		for _, s := range []struct {
			title string
			ms    []Margin
		}{{"tenant", r.Tenants}, {"tag (jobs with several tags count in each)", r.Tags}, {"total", totals}} {
			fmt.Fprintf(tw, "\n%s\tcurrency\tjobs\tengine s\trevenue\tresource cost\tmargin\tmargin %%\t\n", s.title)
			for _, m := range s.ms {
				rev, cost := price.RoundInvoice(m.Revenue, m.Currency), price.RoundInvoice(m.Cost, m.Currency)
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", m.Key, m.Currency, m.Jobs, m.EngineMs.Div(decimal.NewFromInt(1000)).StringFixed(1),
					price.DisplayAmount(rev, m.Currency), price.DisplayAmount(cost, m.Currency), price.DisplayAmount(rev.Sub(cost), m.Currency), m.MarginPercent())
			}
		}
		return tw.Flush()
	}
	return fmt.Errorf("%w %q for the all-tenants report; use table, csv or json", ErrInvalidFormat, f)
}

// ResourceRates is one version of the operator's resource costs, the cost
// side of OperatorReport: per millisecond of engine time (admission to
// end), per MiB of KV memory held for a millisecond, per millisecond of
// tool execution. The latest version effective at a job's created_at, in
// its charges' currency, costs it.
type ResourceRates struct {
	ID          int64           `json:"id"`
	EffectiveAt time.Time       `json:"effective_at"`
	Currency    string          `json:"currency"`
	EngineMs    decimal.Decimal `json:"engine_ms"`
	KVMiBMs     decimal.Decimal `json:"kv_mib_ms"`
	ToolMs      decimal.Decimal `json:"tool_ms"`
	Note        string          `json:"note,omitempty"`
}

// ListResourceRates returns every version of the resource rates, oldest
// first.
func ListResourceRates(ctx context.Context, db DB) ([]ResourceRates, error) {
	rows, err := db.Query(ctx, `SELECT id, effective_at, currency, engine_ms, kv_mib_ms, tool_ms, note FROM resource_rates ORDER BY effective_at, id`)
	if err != nil {
		return nil, fmt.Errorf("billing: list resource rates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ResourceRates, error) {
		var r ResourceRates
		err := row.Scan(&r.ID, &r.EffectiveAt, &r.Currency, &r.EngineMs, &r.KVMiBMs, &r.ToolMs, &r.Note)
		r.EffectiveAt = r.EffectiveAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("billing: list resource rates: %w", err)
	}
	return out, nil
}

// AddResourceRates stores a new version of the resource rates and returns
// it with its id. Rates must not be negative (price.ErrInvalidBook).
func AddResourceRates(ctx context.Context, db DB, r ResourceRates) (ResourceRates, error) {
	switch {
	case r.EffectiveAt.IsZero():
		return r, fmt.Errorf("%w: resource rates need the time they take effect", price.ErrInvalidBook)
	case price.ValidateCurrency(r.Currency) != nil:
		return r, fmt.Errorf("%w: %v", price.ErrInvalidBook, price.ValidateCurrency(r.Currency))
	case r.EngineMs.IsNegative() || r.KVMiBMs.IsNegative() || r.ToolMs.IsNegative():
		return r, fmt.Errorf("%w: resource rates must not be negative", price.ErrInvalidBook)
	}
	if err := db.QueryRow(ctx, `INSERT INTO resource_rates (effective_at, currency, engine_ms, kv_mib_ms, tool_ms, note)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, r.EffectiveAt, r.Currency, r.EngineMs, r.KVMiBMs, r.ToolMs, r.Note).Scan(&r.ID); err != nil {
		return r, fmt.Errorf("billing: add resource rates: %w", err)
	}
	r.EffectiveAt = r.EffectiveAt.UTC()
	return r, nil
}
