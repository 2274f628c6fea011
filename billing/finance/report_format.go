package finance

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/zerolayer/zerolayer/billing/price"
)

// Format is a way of writing a Report.
type Format string

// The report formats.
const (
	// FormatTable is aligned text for a terminal.
	FormatTable Format = "table"
	// FormatCSV is one row per group, with a header, for spreadsheets.
	FormatCSV Format = "csv"
	// FormatJSON is the Report as JSON, amounts as decimal strings.
	FormatJSON Format = "json"
)

// ParseFormat returns the format named s, or an error wrapping
// ErrInvalidFormat.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatTable, FormatCSV, FormatJSON, FormatHTML:
		return f, nil
	}
	return "", fmt.Errorf("%w %q; use table, csv, json or html", ErrInvalidFormat, s)
}

// Write writes r to w in format f.
func (r *Report) Write(w io.Writer, f Format) error {
	switch f {
	case FormatTable:
		return r.WriteTable(w)
	case FormatCSV:
		return r.WriteCSV(w)
	case FormatJSON:
		return r.WriteJSON(w)
	case FormatHTML:
		return r.WriteHTML(w)
	}
	return fmt.Errorf("%w %q; use table, csv, json or html", ErrInvalidFormat, f)
}

// WriteJSON writes r as indented JSON. Amounts are strings holding exact
// decimals ("0.0001234"), so that no reader turns them into floats.
func (r *Report) WriteJSON(w io.Writer) error { return writeIndentedJSON(w, r) }

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ReportViews are the views of a report that WriteCSVView writes, each
// a split of the total: by model, kind of job (generation or embedding),
// priority, prompt-length bucket, combination of value tags, price book,
// and UTC day of the usage.
var ReportViews = []string{"model", "kind", "priority", "bucket", "tag_set", "price_book", "day"}

// CSVHeader is the header row WriteCSVView writes. Columns named *_exact
// hold exact decimals; cost_total is cost_total_exact rounded for display
// so that the column adds up to the total row's (price.DisplayAmounts).
var CSVHeader = []string{
	"tenant", "basis", "from", "to", "currency", "view", "key", "jobs",
	"input_tokens", "cached_input_tokens", "embedding_input_tokens", "output_tokens",
	"cost_input_exact", "cost_cached_input_exact", "cost_embedding_input_exact", "cost_output_exact", "cost_ttft_exact", "cost_tool_exact",
	"cost_total_exact", "cost_total",
}

// view returns the groups of view, which must be one of ReportViews.
func (r *Report) view(view string) ([]Group, error) {
	switch view {
	case "model":
		return r.ByModel, nil
	case "kind":
		return r.ByKind, nil
	case "priority":
		return r.ByPriority, nil
	case "bucket":
		return r.ByBucket, nil
	case "tag_set":
		return r.ByTagSet, nil
	case "price_book":
		return r.ByBook, nil
	case "day":
		return r.ByDay, nil
	}
	return nil, fmt.Errorf("%w: unknown report view %q; use one of %v", ErrInvalidFormat, view, ReportViews)
}

// WriteCSV writes r's view by model as CSV (WriteCSVView).
func (r *Report) WriteCSV(w io.Writer) error { return r.WriteCSVView(w, "model") }

// WriteCSVView writes one view of r as CSV: CSVHeader, one row per group,
// one per credit or adjustment (a period report's), and a total row whose
// cost_total_exact is Net: the sum of the rows above it, and the
// invoice's subtotal for a period report.
func (r *Report) WriteCSVView(w io.Writer, view string) error {
	groups, err := r.view(view)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	from, to := r.From.Format(time.RFC3339), r.To.Format(time.RFC3339)
	amounts := make([]decimal.Decimal, 0, len(groups)+len(r.Credits))
	for _, g := range groups {
		amounts = append(amounts, g.Cost.Total)
	}
	for _, c := range r.Credits {
		amounts = append(amounts, c.Amount)
	}
	shown := price.DisplayAmounts(amounts, r.Currency)
	fixed := func(d decimal.Decimal) string { return d.StringFixed(price.MinorUnits(r.Currency)) }
	head := []string{r.Tenant, r.Basis, from, to, r.Currency, view}
	for i, g := range groups {
		key := g.Key
		if key == "" && view == "tag_set" {
			key = "(no tag)"
		}
		row := append(slices.Clone(head), key, itoa(g.Jobs), itoa(g.InputTokens), itoa(g.CachedInputTokens), itoa(g.EmbeddingInputTokens),
			itoa(g.OutputTokens), g.Cost.Input.String(), g.Cost.CachedInput.String(), g.Cost.EmbeddingInput.String(), g.Cost.Output.String(),
			g.Cost.TTFT.String(), g.Cost.Tool.String(), g.Cost.Total.String(), fixed(shown[i]))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for k, c := range r.Credits {
		row := append(slices.Clone(head), fmt.Sprintf("%s %d: %s", c.Kind, c.ID, c.Reason), "", "", "", "", "", "", "", "", "", "", "",
			c.Amount.String(), fixed(shown[len(groups)+k]))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	t := r.Total
	row := append(slices.Clone(head), "total", itoa(t.Jobs), itoa(t.InputTokens), itoa(t.CachedInputTokens), itoa(t.EmbeddingInputTokens),
		itoa(t.OutputTokens), t.Cost.Input.String(), t.Cost.CachedInput.String(), t.Cost.EmbeddingInput.String(), t.Cost.Output.String(),
		t.Cost.TTFT.String(), t.Cost.Tool.String(), r.Net.String(), r.InvoiceTotal)
	if err := cw.Write(row); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// WriteTable writes r as aligned text: the totals, the cost by dimension,
// then a table per view. Amounts are rounded for display at the
// currency's minor unit, each column so that it adds up to its total
// (price.DisplayAmounts); the exact amounts are in the JSON and CSV.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	cur := r.Currency
	if cur == "" {
		cur = "-"
	}
	money := func(d decimal.Decimal) string { return d.StringFixed(price.MinorUnits(r.Currency)) }
	if r.Basis == "period" {
		inv := "open"
		if r.Invoice != "" {
			inv = "invoiced as " + r.Invoice
		}
		p("tenant %s, billing period %s (%s), currency %s\n", r.Tenant, r.Period, inv, cur)
	} else {
		p("tenant %s, usage from %s to %s (created_at, end excluded), currency %s\n", r.Tenant,
			r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), cur)
	}
	p("jobs %d, input tokens %d (%d cached, %d of embeddings), output tokens %d, not yet rated %d\n",
		r.Total.Jobs, r.Total.InputTokens, r.Total.CachedInputTokens, r.Total.EmbeddingInputTokens, r.Total.OutputTokens, r.Unrated)
	// The charges and each credit, rounded so that they add up to the
	// rounded total.
	parts := []decimal.Decimal{r.Total.Cost.Total}
	for _, c := range r.Credits {
		parts = append(parts, c.Amount)
	}
	parts = price.DisplayAmounts(parts, r.Currency)
	if len(r.Credits) > 0 {
		credits := decimal.Zero
		for _, d := range parts[1:] {
			credits = credits.Add(d)
		}
		p("charges %s, credits and adjustments %s, ", money(parts[0]), money(credits))
	}
	p("total %s %s (before tax; exact %s)\n\n", r.InvoiceTotal, cur, r.Net)
	c := r.Total.Cost
	dims := price.DisplayAmounts([]decimal.Decimal{c.Input, c.CachedInput, c.EmbeddingInput, c.Output, c.TTFT, c.Tool}, r.Currency)
	p("cost by dimension\tinput\tcached input\tembedding input\toutput\tttft\ttool\t\n")
	p("\t%s\t%s\t%s\t%s\t%s\t%s\t\n", money(dims[0]), money(dims[1]), money(dims[2]), money(dims[3]), money(dims[4]), money(dims[5]))
	for _, view := range ReportViews {
		groups, _ := r.view(view)
		amounts := make([]decimal.Decimal, len(groups))
		for i, g := range groups {
			amounts[i] = g.Cost.Total
		}
		shown := price.DisplayAmounts(amounts, r.Currency)
		p("\n%s\tjobs\tinput tok\tcached tok\tembedding tok\toutput tok\ttotal\t\n", strings.ReplaceAll(view, "_", " "))
		for i, g := range groups {
			key := g.Key
			if key == "" {
				key = "(no tag)"
			}
			p("%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", key, g.Jobs, g.InputTokens, g.CachedInputTokens, g.EmbeddingInputTokens, g.OutputTokens,
				money(shown[i]))
		}
	}
	if len(r.ByTag) > 0 {
		p("\ntag (jobs with several tags count in each)\tjobs\ttotal\t\n")
		for _, g := range r.ByTag {
			p("%s\t%d\t%s\t\n", g.Key, g.Jobs, price.DisplayAmount(g.Cost.Total, r.Currency))
		}
	}
	if len(r.Credits) > 0 {
		p("\ncredits and adjustments\tby\tamount\t\n")
		for k, c := range r.Credits {
			p("%s %d: %s\t%s\t%s\t\n", c.Kind, c.ID, c.Reason, c.CreatedBy, money(parts[1+k]))
		}
	}
	return tw.Flush()
}
