package finance

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/billing/price"
)

// FormatHTML is a self-contained page (no scripts, no external files) with
// bar charts of cost by dimension, model, kind of job, priority, bucket and
// tag, and the daily trend.
const FormatHTML Format = "html"

// The geometry of the HTML report's charts, in CSS pixels. Every
// horizontal bar starts at htmlLabelW, after the fixed label column, and
// htmlBarW is the period total: a bar's width is its amount / the total ×
// htmlBarW, on every chart, so bars compare across charts.
const (
	htmlLabelW  = 220 // the label column
	htmlBarW    = 560 // the bar area: 100 % of the period total
	htmlGap     = 10  // between the bar area and the value column
	htmlValueW  = 300 // the value column
	htmlRowH    = 24  // one bar's row
	htmlBarH    = 14  // one bar's thickness
	htmlDailyH  = 140 // the daily chart's plot height: the largest day
	htmlLabelCh = 30  // labels longer than this are cut (the full one is the tooltip)
)

// The colours of the bars: htmlBarColor for the horizontal bars of every
// chart (one scale: the period total), htmlDayColor for the daily trend's
// vertical bars (their own scale: the largest day).
const (
	htmlBarColor = "#3b7dd8"
	htmlDayColor = "#e08a3c"
)

// htmlBar is one bar of a chart, everything formatted: Amount is rounded
// for display (the exact amounts are in the JSON and CSV formats).
type htmlBar struct {
	Label     string // as printed, cut to htmlLabelCh
	FullLabel string
	Amount    string // rounded for display, fixed to the minor unit
	Share     string // of the period total, in percent
	Jobs      int64
	// Width is the bar's length in px; "" draws no bar (a zero or
	// negative amount, or no total).
	Width          string
	Y, TextY       int
	X, TextX, ValX int
}

// htmlChart is one horizontal bar chart.
type htmlChart struct {
	Title string
	Note  string
	Bars  []htmlBar
	// Width and Height are the SVG's size.
	Width, Height int
}

// htmlDay is one day's vertical bar of the daily trend.
type htmlDay struct {
	Day    string // 2006-01-02
	Label  string // under the bar; "" when the days are too many to label each
	Amount string // rounded for display
	Jobs   int64
	// X, Y, W, H place the bar; H is "" for no bar.
	X, Y, W, H string
	LabelX     string
}

// htmlDaily is the daily trend chart.
type htmlDaily struct {
	Days          []htmlDay
	Max           string // the largest day's amount, rounded for display
	MaxDay        string
	Width, Height int
	PlotX, PlotY  int
	PlotW, PlotH  int
	AxisY         int
}

// htmlScale places amounts on the report's one scale: the period total is
// htmlBarW pixels.
type htmlScale struct {
	total    decimal.Decimal
	currency string
}

// width is amount's bar length in px, one decimal; "" for no bar.
func (s htmlScale) width(amount decimal.Decimal) string {
	if !s.total.IsPositive() || !amount.IsPositive() {
		return ""
	}
	w, _ := amount.Div(s.total).Mul(decimal.NewFromInt(htmlBarW)).Float64()
	w = min(w, htmlBarW)
	return strconv.FormatFloat(w, 'f', 1, 64)
}

// share is amount's share of the total, "41.9 %"; "" without a total.
func (s htmlScale) share(amount decimal.Decimal) string {
	if !s.total.IsPositive() {
		return ""
	}
	p, _ := amount.Div(s.total).Mul(decimal.NewFromInt(100)).Float64()
	return fmt.Sprintf("%.1f %%", p)
}

// chart lays out one chart's bars: labels, exact amounts (drawn on the
// scale), the display amounts printed, and the jobs (0: not printed).
func (s htmlScale) chart(title, note string, labels []string, exact, display []decimal.Decimal, jobs []int64) htmlChart {
	c := htmlChart{Title: title, Note: note, Width: htmlLabelW + htmlBarW + htmlGap + htmlValueW, Height: len(labels) * htmlRowH}
	places := price.MinorUnits(s.currency)
	for i, l := range labels {
		short := l
		if utf8.RuneCountInString(l) > htmlLabelCh {
			short = string([]rune(l)[:htmlLabelCh-1]) + "…"
		}
		y := i * htmlRowH
		c.Bars = append(c.Bars, htmlBar{
			Label: short, FullLabel: l, Amount: display[i].StringFixedBank(places), Share: s.share(exact[i]), Jobs: jobs[i],
			Width: s.width(exact[i]), Y: y + (htmlRowH-htmlBarH)/2, TextY: y + htmlRowH/2 + 5,
			X: htmlLabelW, TextX: 0, ValX: htmlLabelW + htmlBarW + htmlGap,
		})
	}
	return c
}

// groupChart is the chart of groups that partition the total (by model,
// priority or bucket): their display amounts add up to the total's.
func (s htmlScale) groupChart(title string, groups []Group) htmlChart {
	labels, exact, jobs := make([]string, len(groups)), make([]decimal.Decimal, len(groups)), make([]int64, len(groups))
	for i, g := range groups {
		labels[i], exact[i], jobs[i] = g.Key, g.Cost.Total, g.Jobs
	}
	return s.chart(title, "", labels, exact, price.DisplayAmounts(exact, s.currency), jobs)
}

// daily lays out the daily trend: one vertical bar per day, its height
// the day's total over the largest day's.
func (r *Report) daily() htmlDaily {
	d := htmlDaily{PlotX: htmlLabelW, PlotY: 8, PlotW: htmlBarW, PlotH: htmlDailyH}
	d.AxisY = d.PlotY + d.PlotH
	d.Width, d.Height = htmlLabelW+htmlBarW+htmlGap+htmlValueW, d.AxisY+20
	var days []ledger.DailyTotal
	for _, day := range r.Daily {
		if r.Currency == "" || day.Currency == r.Currency {
			days = append(days, day)
		}
	}
	if len(days) == 0 {
		return d
	}
	mx := decimal.Zero
	for _, day := range days {
		if day.Cost.Total.GreaterThan(mx) {
			mx, d.MaxDay = day.Cost.Total, day.Day
		}
	}
	d.Max = price.DisplayAmount(mx, r.Currency)
	slot := float64(htmlBarW) / float64(len(days))
	every := 1 // label every day when they fit, else every few
	for slot*float64(every) < 22 {
		every++
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	for i, day := range days {
		x := float64(htmlLabelW) + float64(i)*slot
		bw := min(slot*0.7, 32)
		hd := htmlDay{Day: day.Day, Amount: price.DisplayAmount(day.Cost.Total, r.Currency), Jobs: day.Jobs,
			X: f(x + (slot-bw)/2), W: f(bw), LabelX: f(x + slot/2)}
		if i%every == 0 && len(day.Day) == len("2006-01-02") {
			hd.Label = day.Day[8:]
			if i == 0 || day.Day[8:] == "01" {
				hd.Label = day.Day[5:]
			}
		}
		if mx.IsPositive() && day.Cost.Total.IsPositive() {
			h, _ := day.Cost.Total.Div(mx).Mul(decimal.NewFromInt(htmlDailyH)).Float64()
			hd.H, hd.Y = f(h), f(float64(d.AxisY)-h)
		}
		d.Days = append(d.Days, hd)
	}
	return d
}

// WriteHTML writes r as a self-contained HTML page: the totals, then bar
// charts of the cost by dimension, model, kind of job (generation or
// embedding), priority, bucket, price book and tag, all drawn on one scale (the full bar area is the period total), and the
// daily trend. Amounts are rounded for display at the currency's minor
// unit; the exact ones are in the JSON and CSV formats.
func (r *Report) WriteHTML(w io.Writer) error {
	s := htmlScale{total: r.Total.Cost.Total, currency: r.Currency}
	c := r.Total.Cost
	dims := []decimal.Decimal{c.Input, c.CachedInput, c.EmbeddingInput, c.Output, c.TTFT, c.Tool}
	charts := []htmlChart{s.chart("Cost by dimension", "",
		[]string{"input tokens", "cached input tokens", "embedding input tokens", "output tokens", "time to first token", "tool time"},
		dims, price.DisplayAmounts(dims, r.Currency), make([]int64, len(dims)))}
	charts = append(charts,
		s.groupChart("Cost by model", r.ByModel),
		s.groupChart("Cost by kind of job", r.ByKind),
		s.groupChart("Cost by priority", r.ByPriority),
		s.groupChart("Cost by bucket", r.ByBucket),
		s.groupChart("Cost by price book", r.ByBook))
	var labels []string
	var exact, display []decimal.Decimal
	var jobs []int64
	for _, g := range append(r.ByTag, Group{Key: "(untagged)", Jobs: r.Untagged.Jobs, Cost: r.Untagged.Cost}) {
		labels, exact, jobs = append(labels, g.Key), append(exact, g.Cost.Total), append(jobs, g.Jobs)
		display = append(display, price.RoundInvoice(g.Cost.Total, r.Currency))
	}
	charts = append(charts, s.chart("Cost by tag",
		"A job with several tags counts under each, so the tags overlap and do not add up to the total; "+
			"the last bar, (untagged), is the jobs without a tag.", labels, exact, display, jobs))
	// The charges and each credit, rounded so that they add up to the
	// rounded total, as in the table.
	type credit struct{ Text, Amount string }
	parts := []decimal.Decimal{r.Total.Cost.Total}
	for _, c := range r.Credits {
		parts = append(parts, c.Amount)
	}
	parts = price.DisplayAmounts(parts, r.Currency)
	places := price.MinorUnits(r.Currency)
	var credits []credit
	for k, c := range r.Credits {
		credits = append(credits, credit{fmt.Sprintf("%s %d: %s (%s)", c.Kind, c.ID, c.Reason, c.CreatedBy), parts[1+k].StringFixed(places)})
	}
	charges := price.DisplayAmount(r.Total.Cost.Total, r.Currency)
	if len(r.Credits) > 0 {
		charges = parts[0].StringFixed(places)
	}
	return reportPage.Execute(w, struct {
		R        *Report
		Charts   []htmlChart
		Daily    htmlDaily
		From, To string
		Total    string
		Credits  []credit
		Net      string
		Color    string
		DayColor string
		BarW     int
	}{r, charts, r.daily(), r.From.UTC().Format("2006-01-02 15:04"), r.To.UTC().Format("2006-01-02 15:04"),
		charges, credits, r.InvoiceTotal, htmlBarColor, htmlDayColor, htmlBarW})
}

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>zerolayer billing report: {{.R.Tenant}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table.kv td{padding:.1em 1em .1em 0}
svg{display:block;overflow:visible}
svg text{font:13px system-ui,sans-serif;fill:#222}
svg text.value{font-variant-numeric:tabular-nums}
svg text.small{font-size:11px;fill:#555}
.note{color:#666;font-size:.9em;margin:.2em 0 .5em}
.warn{color:#a33}
</style></head><body>
<h1>Billing report: {{.R.Tenant}}</h1>
<table class="kv">
{{if .R.Period}}<tr><td>billing month</td><td>{{.R.Period}}, {{if .R.Invoice}}invoiced as {{.R.Invoice}}{{else}}open{{end}}: the charges billed in it (its usage, and late usage of earlier months)</td></tr>
{{else}}<tr><td>period</td><td>usage created from {{.From}} to {{.To}} UTC (end excluded)</td></tr>
{{end}}
<tr><td>jobs</td><td>{{.R.Total.Jobs}}</td></tr>
<tr><td>tokens</td><td>{{.R.Total.InputTokens}} input ({{.R.Total.CachedInputTokens}} cached, {{.R.Total.EmbeddingInputTokens}} of embeddings), {{.R.Total.OutputTokens}} output</td></tr>
<tr><td>{{if .Credits}}charges{{else}}total{{end}}</td><td>{{.Total}} {{.R.Currency}}</td></tr>
{{range .Credits}}<tr><td></td><td>{{.Text}}: {{.Amount}} {{$.R.Currency}}</td></tr>
{{end}}{{if .Credits}}<tr><td>total</td><td>{{.Net}} {{$.R.Currency}} (before tax)</td></tr>
{{end}}
{{if .R.Unrated}}<tr class="warn"><td>not yet rated</td><td>{{.R.Unrated}} usage records, in no figure of this report</td></tr>
{{end}}</table>
<p class="note">Every bar is drawn on one scale: the full bar area ({{.BarW}} px) is the period total, {{.Total}} {{.R.Currency}}. Amounts are rounded for display; the exact amounts are in the JSON and CSV formats.</p>
{{range .Charts}}<h2>{{.Title}}</h2>{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{if .Bars}}<svg width="{{.Width}}" height="{{.Height}}" role="img" aria-label="{{.Title}}">
{{range .Bars}}<g><title>{{.FullLabel}}: {{.Amount}} {{$.R.Currency}}</title><text x="{{.TextX}}" y="{{.TextY}}">{{.Label}}</text>
<rect x="{{.X}}" y="{{.Y}}" width="{{$.BarW}}" height="14" fill="#eef1f5" shape-rendering="crispEdges"/>
{{if .Width}}<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.Width}}" height="14" fill="{{$.Color}}" shape-rendering="crispEdges"/>
{{end}}<text class="value" x="{{.ValX}}" y="{{.TextY}}">{{.Amount}} {{$.R.Currency}}{{if .Share}} · {{.Share}}{{end}}{{if .Jobs}} · {{.Jobs}} jobs{{end}}</text></g>
{{end}}</svg>
{{else}}<p class="note">none</p>
{{end}}{{end}}<h2>Daily trend</h2>
{{with .Daily}}{{if .Days}}<p class="note">Cost per UTC day from the daily rollups, on its own scale: the tallest bar is the largest day ({{.MaxDay}}, {{.Max}} {{$.R.Currency}}). The rollups catch up shortly after rating, so the last day may lag.</p>
<svg width="{{.Width}}" height="{{.Height}}" role="img" aria-label="Daily trend">
<text class="small" x="{{.PlotX}}" y="{{.PlotY}}" dx="-8" dy="4" text-anchor="end">{{.Max}} {{$.R.Currency}}</text>
<text class="small" x="{{.PlotX}}" y="{{.AxisY}}" dx="-8" text-anchor="end">0</text>
<rect x="{{.PlotX}}" y="{{.AxisY}}" width="{{.PlotW}}" height="1" fill="#999" shape-rendering="crispEdges"/>
{{range .Days}}<g><title>{{.Day}}: {{.Amount}} {{$.R.Currency}}, {{.Jobs}} jobs</title>
{{if .H}}<rect class="day" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{$.DayColor}}" shape-rendering="crispEdges"/>
{{end}}{{if .Label}}<text class="small" x="{{.LabelX}}" y="{{$.Daily.AxisY}}" dy="14" text-anchor="middle">{{.Label}}</text>
{{end}}</g>
{{end}}</svg>
{{else}}<p class="note">no daily rollups yet</p>
{{end}}{{end}}</body></html>
`))
