package finance

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// OperatorMonth is the operator's view of one billing month over every
// tenant, built from the month's documents: a closed tenant's invoices and
// credit notes as issued, an open tenant's as closing it now would issue
// them (drafts). Every amount is in the currency's minor unit, rounded
// once by the document rules (see Invoice) or, for the tag view, as
// stated there; every total is the sum of the rows printed above it, so
// each view adds up as printed, and per currency the tenant view's totals
// equal the sum of the month's invoices and credit notes.
type OperatorMonth struct {
	// Period is the month, 2006-01.
	Period string `json:"period"`
	// Tenants has a row per tenant and currency (a document).
	Tenants []MonthRow `json:"tenants"`
	// Tags splits each currency's usage by the combination of value tags
	// of its jobs, then adds the line rounding and the credits, so that it
	// adds up to the same subtotal as the tenant view.
	Tags []MonthRow `json:"tags"`
	// Total has a row per currency: the sum of the tenant rows.
	Total []MonthRow `json:"total"`
}

// MonthRow is one row of OperatorMonth. Amounts are rounded at the
// currency's minor unit.
type MonthRow struct {
	// Key is the tenant, the tag set ("effective_service+high_latency_risk",
	// "(no tag)", "(line rounding)", "(credits and adjustments)") or
	// "total".
	Key      string `json:"key"`
	Currency string `json:"currency"`
	// Document is the invoice or credit note number, "draft" while the
	// month is open for the tenant; Kind is invoice or credit_note.
	Document string `json:"document,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Jobs     int64  `json:"jobs"`
	// Usage is the usage lines' amount, Credits the credit and adjustment
	// lines', Subtotal their sum (the revenue); Tax, Total (Subtotal +
	// Tax), BalanceApplied and AmountDue as on the document.
	Usage          decimal.Decimal `json:"usage"`
	Credits        decimal.Decimal `json:"credits"`
	Subtotal       decimal.Decimal `json:"subtotal"`
	Tax            decimal.Decimal `json:"tax"`
	Total          decimal.Decimal `json:"total"`
	BalanceApplied decimal.Decimal `json:"balance_applied"`
	AmountDue      decimal.Decimal `json:"amount_due"`
	// ResourceCost is the resource cost of the jobs (see OperatorReport),
	// rounded; Margin is Subtotal − ResourceCost.
	ResourceCost decimal.Decimal `json:"resource_cost"`
	Margin       decimal.Decimal `json:"margin"`
}

// OperatorMonthViews are the views of OperatorMonth, in the order they
// print.
var OperatorMonthViews = []string{"tenant", "tag", "total"}

// monthJobs is every charge of billing month $1 with its resource cost.
const monthJobs = `
	SELECT c.tenant_id, c.currency, c.total, c.tags,
		coalesce(u.total_ms * rr.engine_ms + u.memory_allocated_mb * u.total_ms * rr.kv_mib_ms + u.tool_execution_time_ms * rr.tool_ms, 0) AS cost
	FROM charges c JOIN usage u USING (tenant_id, job_id)
	LEFT JOIN LATERAL (SELECT * FROM resource_rates r WHERE r.effective_at <= u.created_at AND r.currency = c.currency
		ORDER BY r.effective_at DESC, r.id DESC LIMIT 1) rr ON true
	WHERE c.period = $1::date`

// BuildOperatorMonth reads the operator's view of billing month period
// (2006-01) from db (use one REPEATABLE READ snapshot); now is the issue
// time of the drafts of the tenants whose month is open.
func BuildOperatorMonth(ctx context.Context, db DB, period string, now time.Time) (*OperatorMonth, error) {
	m, err := ledger.ParsePeriod(period)
	if err != nil {
		return nil, err
	}
	day := m.Format(time.DateOnly)
	fail := func(err error) (*OperatorMonth, error) {
		return nil, fmt.Errorf("billing: all tenants' report of %s: %w", period, err)
	}
	rows, err := db.Query(ctx, `SELECT tenant_id FROM charges WHERE period = $1::date
		UNION SELECT tenant_id FROM credits WHERE period = $1::date
		UNION SELECT tenant_id FROM invoices WHERE period = $1::date ORDER BY 1`, day)
	if err != nil {
		return fail(err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fail(err)
	}
	supplier, err := GetSupplier(ctx, db)
	if err != nil && !errors.Is(err, ErrNoSupplier) {
		return fail(err)
	}
	// Resource cost per tenant and currency, and per tag set and currency.
	type key struct{ a, cur string }
	cost := map[key]decimal.Decimal{}
	tagRows := map[key]*MonthRow{}
	exactUsage := map[string]decimal.Decimal{} // per currency
	jr, err := db.Query(ctx, `SELECT j.tenant_id, j.currency, array_to_string(j.tags, '+'), count(*), sum(j.total), sum(j.cost)
		FROM (`+monthJobs+`) j GROUP BY 1, 2, 3`, day)
	if err != nil {
		return fail(err)
	}
	var tenant, cur, tags string
	var n int64
	var charges, rc decimal.Decimal
	if _, err := pgx.ForEachRow(jr, []any{&tenant, &cur, &tags, &n, &charges, &rc}, func() error {
		cost[key{tenant, cur}] = cost[key{tenant, cur}].Add(rc)
		t := tagRows[key{cmp.Or(tags, "(no tag)"), cur}]
		if t == nil {
			t = &MonthRow{Key: cmp.Or(tags, "(no tag)"), Currency: cur}
			tagRows[key{t.Key, cur}] = t
		}
		t.Jobs += n
		t.Usage = t.Usage.Add(charges)          // exact until rounded below
		t.ResourceCost = t.ResourceCost.Add(rc) // exact until rounded below
		exactUsage[cur] = exactUsage[cur].Add(charges)
		return nil
	}); err != nil {
		return fail(err)
	}

	r := &OperatorMonth{Period: period}
	usageLines := map[string]decimal.Decimal{} // per currency: the documents' usage lines
	creditLines := map[string]decimal.Decimal{}
	for _, tenant := range tenants {
		docs, err := ListPeriodInvoices(ctx, db, tenant, period)
		if err != nil {
			return fail(err)
		}
		for i, d := range docs {
			if docs[i], err = GetInvoice(ctx, db, d.Number); err != nil {
				return fail(err)
			}
		}
		if len(docs) == 0 {
			if docs, err = draftDocuments(ctx, db, tenant, m, now, supplier); err != nil {
				return fail(err)
			}
		}
		for _, d := range docs {
			row := MonthRow{Key: tenant, Currency: d.Currency, Document: cmp.Or(d.Number, "draft"), Kind: d.Kind, Jobs: d.Jobs,
				Subtotal: d.SubtotalDisplay, Tax: d.TaxDisplay, Total: d.TotalDisplay, BalanceApplied: d.BalanceApplied, AmountDue: d.AmountDue}
			for _, l := range d.Lines {
				if l.Kind == LineUsage {
					row.Usage = row.Usage.Add(l.AmountDisplay)
				} else {
					row.Credits = row.Credits.Add(l.AmountDisplay)
				}
			}
			if d.TaxRule == taxLegacy {
				// Invoices issued before the rules printed rounded totals
				// only: the usage is the subtotal less the credits.
				row.Usage = row.Subtotal.Sub(row.Credits)
			}
			row.ResourceCost = price.RoundInvoice(cost[key{tenant, d.Currency}], d.Currency)
			row.Margin = row.Subtotal.Sub(row.ResourceCost)
			usageLines[d.Currency] = usageLines[d.Currency].Add(row.Usage)
			creditLines[d.Currency] = creditLines[d.Currency].Add(row.Credits)
			r.Tenants = append(r.Tenants, row)
		}
	}
	slices.SortStableFunc(r.Tenants, func(a, b MonthRow) int {
		return cmp.Or(strings.Compare(a.Currency, b.Currency), b.Subtotal.Cmp(a.Subtotal), strings.Compare(a.Key, b.Key))
	})
	r.Total = sumMonthRows(r.Tenants)

	// The tag view: each tag set's exact charges rounded so that the
	// rows add up to the currency's exact usage rounded (largest
	// remainder, see price.DisplayAmounts), then the difference the documents'
	// line-by-line rounding makes, then the credits: the view's total is
	// the tenant view's subtotal.
	var currencies []string
	for _, t := range r.Total {
		currencies = append(currencies, t.Currency)
	}
	for _, cur := range currencies {
		var rowsOf []*MonthRow
		for k, t := range tagRows {
			if k.cur == cur {
				rowsOf = append(rowsOf, t)
			}
		}
		slices.SortFunc(rowsOf, func(a, b *MonthRow) int { return cmp.Or(b.Usage.Cmp(a.Usage), strings.Compare(a.Key, b.Key)) })
		amounts := make([]decimal.Decimal, len(rowsOf))
		for i, t := range rowsOf {
			amounts[i] = t.Usage
		}
		shown := price.DisplayAmounts(amounts, cur)
		for i, t := range rowsOf {
			t.Usage, t.Subtotal = shown[i], shown[i]
			t.ResourceCost = price.RoundInvoice(t.ResourceCost, cur)
			t.Margin = t.Subtotal.Sub(t.ResourceCost)
			r.Tags = append(r.Tags, *t)
		}
		rounding := usageLines[cur].Sub(price.RoundInvoice(exactUsage[cur], cur))
		r.Tags = append(r.Tags, MonthRow{Key: "(line rounding)", Currency: cur, Usage: rounding, Subtotal: rounding, Margin: rounding},
			MonthRow{Key: "(credits and adjustments)", Currency: cur, Credits: creditLines[cur], Subtotal: creditLines[cur], Margin: creditLines[cur]})
	}
	return r, nil
}

// sumMonthRows adds rows up per currency, by currency.
func sumMonthRows(rows []MonthRow) []MonthRow {
	var out []MonthRow
	for _, row := range rows {
		i := slices.IndexFunc(out, func(t MonthRow) bool { return t.Currency == row.Currency })
		if i < 0 {
			out = append(out, MonthRow{Key: "total", Currency: row.Currency})
			i = len(out) - 1
		}
		t := &out[i]
		t.Jobs += row.Jobs
		t.Usage, t.Credits, t.Subtotal = t.Usage.Add(row.Usage), t.Credits.Add(row.Credits), t.Subtotal.Add(row.Subtotal)
		t.Tax, t.Total = t.Tax.Add(row.Tax), t.Total.Add(row.Total)
		t.BalanceApplied, t.AmountDue = t.BalanceApplied.Add(row.BalanceApplied), t.AmountDue.Add(row.AmountDue)
		t.ResourceCost, t.Margin = t.ResourceCost.Add(row.ResourceCost), t.Margin.Add(row.Margin)
	}
	slices.SortFunc(out, func(a, b MonthRow) int { return strings.Compare(a.Currency, b.Currency) })
	return out
}

// view returns the rows of view, one of OperatorMonthViews, with the
// total rows of each currency after them (computed from those rows).
func (r *OperatorMonth) view(view string) ([]MonthRow, error) {
	switch view {
	case "tenant":
		return append(slices.Clone(r.Tenants), r.Total...), nil
	case "tag":
		return append(slices.Clone(r.Tags), sumMonthRows(r.Tags)...), nil
	case "total":
		return slices.Clone(r.Total), nil
	}
	return nil, fmt.Errorf("%w: view %q; use one of %s", ErrInvalidFormat, view, strings.Join(OperatorMonthViews, ", "))
}

// MonthCSVHeader is the header of OperatorMonth's CSV views.
var MonthCSVHeader = []string{"period", "view", "key", "currency", "document", "kind", "jobs", "usage", "credits", "subtotal",
	"tax", "total", "balance_applied", "amount_due", "resource_cost", "margin"}

// WriteView writes one view (OperatorMonthViews) of r in format: table,
// csv, json or html.
func (r *OperatorMonth) WriteView(w io.Writer, f Format, view string) error {
	rows, err := r.view(view)
	if err != nil {
		return err
	}
	fx := func(d decimal.Decimal, cur string) string { return d.StringFixedBank(price.MinorUnits(cur)) }
	switch f {
	case FormatJSON:
		return writeIndentedJSON(w, struct {
			Period string     `json:"period"`
			View   string     `json:"view"`
			Rows   []MonthRow `json:"rows"`
		}{r.Period, view, rows})
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write(MonthCSVHeader)
		for _, m := range rows {
			cw.Write([]string{r.Period, view, m.Key, m.Currency, m.Document, m.Kind, itoa(m.Jobs), fx(m.Usage, m.Currency),
				fx(m.Credits, m.Currency), fx(m.Subtotal, m.Currency), fx(m.Tax, m.Currency), fx(m.Total, m.Currency),
				fx(m.BalanceApplied, m.Currency), fx(m.AmountDue, m.Currency), fx(m.ResourceCost, m.Currency), fx(m.Margin, m.Currency)})
		}
		cw.Flush()
		return cw.Error()
	case FormatTable:
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "all tenants, billing month %s, view %s: %s\n", r.Period, view, monthNote)
		fmt.Fprintf(tw, "\n%s\tcurrency\tdocument\tjobs\tusage\tcredits\tsubtotal\ttax\ttotal\tbalance applied\tamount due\tresource cost\tmargin\t\n", view)
		for _, m := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Key, m.Currency, m.Document, m.Jobs,
				fx(m.Usage, m.Currency), fx(m.Credits, m.Currency), fx(m.Subtotal, m.Currency), fx(m.Tax, m.Currency), fx(m.Total, m.Currency),
				fx(m.BalanceApplied, m.Currency), fx(m.AmountDue, m.Currency), fx(m.ResourceCost, m.Currency), fx(m.Margin, m.Currency))
		}
		return tw.Flush()
	case FormatHTML:
		v := monthPageView{Period: r.Period, View: view, Note: monthNote}
		for _, m := range rows {
			v.Rows = append(v.Rows, []string{m.Key, m.Currency, m.Document, itoa(m.Jobs), fx(m.Usage, m.Currency), fx(m.Credits, m.Currency),
				fx(m.Subtotal, m.Currency), fx(m.Tax, m.Currency), fx(m.Total, m.Currency), fx(m.BalanceApplied, m.Currency),
				fx(m.AmountDue, m.Currency), fx(m.ResourceCost, m.Currency), fx(m.Margin, m.Currency)})
			v.Total = append(v.Total, m.Key == "total")
		}
		return monthPage.Execute(w, v)
	}
	return fmt.Errorf("%w %q for the all-tenants report; use table, csv, json or html", ErrInvalidFormat, f)
}

// monthNote states the rounding of OperatorMonth once.
const monthNote = "amounts as the documents charge them (each line rounded half to even at the minor unit, tax by the tenant's rule); " +
	"drafts for the tenants whose month is open; every total is the sum of the rows above it; " +
	"the tag view rounds each tag set's charges so that they add up, then adds the documents' line rounding and the credits"

type monthPageView struct {
	Period, View, Note string
	Rows               [][]string
	Total              []bool
}

var monthPage = template.Must(template.New("month").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>All tenants, {{.Period}}, by {{.View}}</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
table{border-collapse:collapse;width:100%}
th,td{padding:.3em .5em;border-bottom:1px solid #ddd;text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{background:#f2f2f2}
tr.total td{font-weight:bold;border-top:2px solid #222}
.note{color:#555}
</style></head><body>
<h1>All tenants, billing month {{.Period}}, by {{.View}}</h1>
<p class="note">{{.Note}}</p>
<table>
<thead><tr><th>{{.View}}</th><th>currency</th><th>document</th><th>jobs</th><th>usage</th><th>credits</th><th>subtotal</th><th>tax</th><th>total</th><th>balance applied</th><th>amount due</th><th>resource cost</th><th>margin</th></tr></thead>
<tbody>
{{range $i, $r := .Rows}}<tr{{if index $.Total $i}} class="total"{{end}}>{{range $r}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
</body></html>
`))
