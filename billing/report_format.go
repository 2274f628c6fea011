package billing

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
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

// CSVHeader is the header row WriteCSV writes. Section is total, model,
// priority, bucket, tag or untagged; key is the group's value.
var CSVHeader = []string{
	"tenant", "from", "to", "currency", "section", "key", "jobs",
	"input_tokens", "output_tokens", "cached_input_tokens",
	"cost_input", "cost_output", "cost_ttft", "cost_tool", "cost_total",
}

// sections lists r's groups in the order the formats write them.
func (r *Report) sections() []struct {
	name   string
	groups []Group
} {
	return []struct {
		name   string
		groups []Group
	}{
		{"total", []Group{r.Total}},
		{"model", r.ByModel},
		{"priority", r.ByPriority},
		{"bucket", r.ByBucket},
		{"tag", r.ByTag},
		{"untagged", []Group{r.Untagged}},
	}
}

// WriteCSV writes r as CSV: CSVHeader, then one row per group (the total
// first), amounts exact and unrounded.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	from, to := r.From.Format(time.RFC3339), r.To.Format(time.RFC3339)
	for _, s := range r.sections() {
		for _, g := range s.groups {
			row := []string{
				r.Tenant, from, to, r.Currency, s.name, g.Key, itoa(g.Jobs),
				itoa(g.InputTokens), itoa(g.OutputTokens), itoa(g.CachedInputTokens),
				g.Cost.Input.String(), g.Cost.Output.String(), g.Cost.TTFT.String(),
				g.Cost.Tool.String(), g.Cost.Total.String(),
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// WriteTable writes r as aligned text: the totals and invoice total, the
// cost by dimension, then a table per dimension. Amounts are exact; only
// the invoice total is rounded.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	cur := r.Currency
	if cur == "" {
		cur = "-"
	}
	p("tenant %s, %s to %s (created_at, end excluded), currency %s\n", r.Tenant,
		r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), cur)
	p("jobs %d, input tokens %d, output tokens %d, cached input tokens %d, not yet rated %d\n",
		r.Total.Jobs, r.Total.InputTokens, r.Total.OutputTokens, r.Total.CachedInputTokens, r.Unrated)
	p("total %s, invoice total %s %s\n\n", r.Total.Cost.Total, r.InvoiceTotal, cur)
	p("cost by dimension\tinput\toutput\tttft\ttool\t\n")
	c := r.Total.Cost
	p("\t%s\t%s\t%s\t%s\t\n", c.Input, c.Output, c.TTFT, c.Tool)
	for _, s := range r.sections()[1:] {
		p("\n%s\tjobs\tinput tok\toutput tok\tinput\toutput\tttft\ttool\ttotal\t\n", s.name)
		for _, g := range s.groups {
			key := g.Key
			if s.name == "untagged" {
				key = "(no tag)"
			}
			p("%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", key, g.Jobs, g.InputTokens, g.OutputTokens,
				g.Cost.Input, g.Cost.Output, g.Cost.TTFT, g.Cost.Tool, g.Cost.Total)
		}
	}
	return tw.Flush()
}
