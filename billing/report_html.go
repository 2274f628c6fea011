package billing

import (
	"html/template"
	"io"

	"github.com/shopspring/decimal"
)

// FormatHTML is a self-contained page (no scripts, no external files) with
// bar charts of cost by dimension, model, priority, bucket and tag.
const FormatHTML Format = "html"

// htmlBar is one bar of a chart.
type htmlBar struct {
	Label string
	Value string  // exact amount
	Width float64 // percent of the chart's largest bar
	Jobs  int64
}

type htmlChart struct {
	Title string
	Note  string
	Bars  []htmlBar
}

// WriteHTML writes r as an HTML page with one bar chart per section.
// Amounts are exact decimals; bar lengths are relative within a chart.
func (r *Report) WriteHTML(w io.Writer) error {
	dims := []htmlBar{
		{Label: "input tokens", Value: r.Total.Cost.Input.String()},
		{Label: "output tokens", Value: r.Total.Cost.Output.String()},
		{Label: "time to first token", Value: r.Total.Cost.TTFT.String()},
		{Label: "tool time", Value: r.Total.Cost.Tool.String()},
	}
	scale(dims, []decimal.Decimal{r.Total.Cost.Input, r.Total.Cost.Output, r.Total.Cost.TTFT, r.Total.Cost.Tool})
	charts := []htmlChart{{Title: "Cost by dimension", Bars: dims}}
	for _, s := range r.sections()[1:] {
		c := htmlChart{Title: "Cost by " + s.name}
		if s.name == "untagged" {
			continue
		}
		if s.name == "tag" {
			c.Note = "A job with several tags counts under each; untagged jobs: " + r.Untagged.Cost.Total.String() + " " + r.Currency + "."
		}
		var vals []decimal.Decimal
		for _, g := range s.groups {
			c.Bars = append(c.Bars, htmlBar{Label: g.Key, Value: g.Cost.Total.String(), Jobs: g.Jobs})
			vals = append(vals, g.Cost.Total)
		}
		scale(c.Bars, vals)
		charts = append(charts, c)
	}
	return reportPage.Execute(w, struct {
		R      *Report
		Charts []htmlChart
		From   string
		To     string
	}{r, charts, r.From.UTC().Format("2006-01-02 15:04"), r.To.UTC().Format("2006-01-02 15:04")})
}

// scale sets each bar's width relative to the largest value.
func scale(bars []htmlBar, vals []decimal.Decimal) {
	mx := decimal.Zero
	for _, v := range vals {
		mx = decimal.Max(mx, v)
	}
	if mx.IsZero() {
		return
	}
	for i, v := range vals {
		bars[i].Width, _ = v.Div(mx).Mul(decimal.NewFromInt(100)).Float64()
	}
}

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>zerolayer billing report: {{.R.Tenant}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:60em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table.kv td{padding:.1em 1em .1em 0}
.row{display:flex;align-items:center;margin:.2em 0}
.label{width:14em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.bar{height:1em;background:#3b7dd8;margin-right:.6em;min-width:1px}
.value{font-variant-numeric:tabular-nums;white-space:nowrap}
.note{color:#666;font-size:.9em}
</style></head><body>
<h1>Billing report: {{.R.Tenant}}</h1>
<table class="kv">
<tr><td>period</td><td>{{.From}} to {{.To}} UTC (end excluded)</td></tr>
<tr><td>jobs</td><td>{{.R.Total.Jobs}}{{if .R.Unrated}} ({{.R.Unrated}} not yet rated){{end}}</td></tr>
<tr><td>tokens</td><td>{{.R.Total.InputTokens}} input ({{.R.Total.CachedInputTokens}} cached), {{.R.Total.OutputTokens}} output</td></tr>
<tr><td>total</td><td>{{.R.Total.Cost.Total}} {{.R.Currency}} (invoice: {{.R.InvoiceTotal}} {{.R.Currency}})</td></tr>
</table>
{{range .Charts}}<h2>{{.Title}}</h2>{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{range .Bars}}<div class="row"><span class="label">{{.Label}}</span><span class="bar" style="width:{{printf "%.1f" .Width}}%"></span><span class="value">{{.Value}}{{if .Jobs}} · {{.Jobs}} jobs{{end}}</span></div>
{{else}}<p class="note">none</p>{{end}}{{end}}
</body></html>
`))
