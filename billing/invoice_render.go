package billing

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"codeberg.org/go-pdf/fpdf"
	"github.com/shopspring/decimal"
)

// FormatPDF is a printable A4 document; only invoices are written in it.
const FormatPDF Format = "pdf"

// displayNote is the note every printed invoice ends with.
const displayNote = "Amounts are rounded for display; exact amounts are in the CSV and JSON."

// tagsNote explains the value-tag table of a printed invoice.
const tagsNote = "For information: a job with several tags counts under each, so the tags overlap and do not add up to the subtotal."

// ParseInvoiceFormat returns the invoice format named s (html, pdf, csv or
// json), or an error wrapping ErrInvalidFormat.
func ParseInvoiceFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatHTML, FormatPDF, FormatCSV, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("%w %q for an invoice; use html, pdf, csv or json", ErrInvalidFormat, s)
}

// Write writes inv to w in format f: html, pdf, csv or json.
func (inv *Invoice) Write(w io.Writer, f Format) error {
	var err error
	switch f {
	case FormatHTML:
		err = inv.WriteHTML(w)
	case FormatPDF:
		err = inv.WritePDF(w)
	case FormatCSV:
		err = inv.WriteCSV(w)
	case FormatJSON:
		err = inv.WriteJSON(w)
	default:
		return fmt.Errorf("%w %q for an invoice; use html, pdf, csv or json", ErrInvalidFormat, f)
	}
	if err != nil {
		return fmt.Errorf("billing: write invoice %s as %s: %w", inv.Number, f, err)
	}
	return nil
}

// WriteJSON writes inv as indented JSON. Amounts are strings holding
// decimals: the *_exact fields exact, the others rounded for display.
func (inv *Invoice) WriteJSON(w io.Writer) error { return writeIndentedJSON(w, inv) }

// InvoiceCSVHeader is the header row Invoice.WriteCSV writes. Columns
// named *_exact hold exact decimals; amount holds the amount rounded for
// display (the lines' add up to the subtotal's).
var InvoiceCSVHeader = []string{
	"invoice", "tenant", "period", "currency", "line", "kind", "description",
	"model", "priority", "batch", "price_book", "dimension", "jobs",
	"quantity", "unit", "unit_price", "amount_exact", "amount",
}

// WriteCSV writes inv as CSV for accounting: InvoiceCSVHeader, one row per
// line, then a subtotal, a tax and a total row (kind subtotal, tax and
// total; the total row's amount is AmountDue).
func (inv *Invoice) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(InvoiceCSVHeader); err != nil {
		return err
	}
	fixed := inv.fixed
	for _, l := range inv.Lines {
		var batch, jobs string
		if l.Kind == LineUsage {
			batch = strconv.FormatBool(l.Batch)
			jobs = itoa(l.Jobs)
		}
		row := []string{
			inv.Number, inv.Tenant, inv.Period, inv.Currency, strconv.Itoa(l.No), l.Kind, l.Description,
			l.Model, l.Priority, batch, l.PriceBook, l.Dimension, jobs,
			l.Quantity.String(), l.Unit, l.UnitPrice.String(), l.Amount.String(), fixed(l.AmountDisplay),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, t := range []struct {
		kind, desc     string
		exact, display decimal.Decimal
	}{
		{"subtotal", "Subtotal", inv.Subtotal, inv.SubtotalDisplay},
		{"tax", "Tax (" + inv.taxPercent() + ")", inv.Tax, inv.TaxDisplay},
		{"total", "Total (amount due)", inv.Total, inv.AmountDue},
	} {
		row := make([]string, len(InvoiceCSVHeader))
		row[0], row[1], row[2], row[3] = inv.Number, inv.Tenant, inv.Period, inv.Currency
		row[5], row[6] = t.kind, t.desc
		row[16], row[17] = t.exact.String(), fixed(t.display)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// fixed prints a display amount with exactly the currency's minor unit's
// decimals.
func (inv *Invoice) fixed(d decimal.Decimal) string {
	return d.StringFixedBank(MinorUnits(inv.Currency))
}

// taxPercent prints the tax rate as a percentage: "20 %".
func (inv *Invoice) taxPercent() string {
	return inv.TaxRate.Mul(decimal.NewFromInt(100)).String() + " %"
}

// customerName is the name billed: the customer's, or the tenant id.
func (inv *Invoice) customerName() string { return cmp.Or(inv.Customer.Name, inv.Tenant) }

// addressLines splits the customer's address into its non-empty lines.
func (inv *Invoice) addressLines() []string {
	var out []string
	for l := range strings.SplitSeq(inv.Customer.Address, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// issued is the issue date, 2006-01-02 (UTC).
func (inv *Invoice) issued() string { return inv.IssuedAt.UTC().Format(time.DateOnly) }

// quantity prints a line's quantity with its unit.
func quantity(l InvoiceLine) string {
	if l.Kind != LineUsage && l.Quantity.IsZero() {
		return ""
	}
	return strings.TrimSpace(l.Quantity.String() + " " + l.Unit)
}

// unitPrice prints a line's exact unit price; empty for a line without one.
func unitPrice(l InvoiceLine) string {
	if l.Kind != LineUsage && l.UnitPrice.IsZero() {
		return ""
	}
	return l.UnitPrice.String()
}

// invoiceView is what the HTML template prints: every amount already
// formatted.
type invoiceView struct {
	Inv         *Invoice
	Name        string
	Address     []string
	Issued      string
	Lines       []invoiceLineView
	Subtotal    string
	TaxRate     string
	Tax         string
	AmountDue   string
	Tags        []invoiceTagView
	TagsNote    string
	DisplayNote string
}

type invoiceLineView struct {
	No          int
	Kind        string
	Description string
	Quantity    string
	UnitPrice   string
	Amount      string
}

type invoiceTagView struct {
	Tag    string
	Jobs   int64
	Amount string
}

func (inv *Invoice) view() invoiceView {
	v := invoiceView{
		Inv: inv, Name: inv.customerName(), Address: inv.addressLines(), Issued: inv.issued(),
		Subtotal: inv.fixed(inv.SubtotalDisplay), TaxRate: inv.taxPercent(), Tax: inv.fixed(inv.TaxDisplay),
		AmountDue: inv.fixed(inv.AmountDue), TagsNote: tagsNote, DisplayNote: displayNote,
	}
	for _, l := range inv.Lines {
		v.Lines = append(v.Lines, invoiceLineView{
			No: l.No, Kind: l.Kind, Description: l.Description, Quantity: quantity(l),
			UnitPrice: unitPrice(l), Amount: inv.fixed(l.AmountDisplay),
		})
	}
	for _, t := range inv.Tags {
		v.Tags = append(v.Tags, invoiceTagView{Tag: t.Tag, Jobs: t.Jobs, Amount: DisplayAmount(t.Amount, inv.Currency)})
	}
	return v
}

// WriteHTML writes inv as a self-contained printable HTML page (no
// scripts, no external resources): the header, the customer, the lines
// with amounts rounded for display and exact unit prices, the totals and
// the value tags.
func (inv *Invoice) WriteHTML(w io.Writer) error { return invoicePage.Execute(w, inv.view()) }

var invoicePage = template.Must(template.New("invoice").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Invoice {{.Inv.Number}}</title>
<style>
@page{size:A4;margin:15mm}
body{font:13px/1.4 system-ui,sans-serif;margin:2em auto;max-width:48em;color:#222}
h1{font-size:1.8em;margin:0 0 .4em}
h2{font-size:1.05em;margin:1.4em 0 .4em}
.head{display:flex;justify-content:space-between;align-items:flex-start;gap:2em}
table{border-collapse:collapse}
table.meta td{padding:.05em .8em .05em 0}
table.lines,table.tags{width:100%;margin-top:.6em}
table.lines th,table.lines td,table.tags th,table.tags td{padding:.3em .5em;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
th{background:#f2f2f2}
.num{text-align:right!important;font-variant-numeric:tabular-nums;white-space:nowrap}
table.totals{margin:1em 0 0 auto}
table.totals td{padding:.2em .5em}
tr.due td{font-weight:bold;border-top:2px solid #222}
.note{color:#555;font-size:.9em}
thead{display:table-header-group}
tr{break-inside:avoid}
</style></head><body>
<div class="head">
<div><h1>Invoice</h1>
<table class="meta">
<tr><td>Number</td><td>{{.Inv.Number}}</td></tr>
<tr><td>Issue date</td><td>{{.Issued}}</td></tr>
<tr><td>Due date</td><td>{{.Inv.DueAt}}</td></tr>
<tr><td>Period</td><td>{{.Inv.Period}}</td></tr>
<tr><td>Currency</td><td>{{.Inv.Currency}}</td></tr>
</table></div>
<div><h2>Bill to</h2>
<div>{{.Name}}</div>
{{range .Address}}<div>{{.}}</div>
{{end}}{{with .Inv.Customer.Email}}<div>{{.}}</div>
{{end}}{{with .Inv.Customer.TaxID}}<div>Tax ID: {{.}}</div>
{{end}}</div>
</div>
<table class="lines">
<thead><tr><th>#</th><th>Description</th><th class="num">Quantity</th><th class="num">Unit price</th><th class="num">Amount ({{.Inv.Currency}})</th></tr></thead>
<tbody>
{{range .Lines}}<tr class="{{.Kind}}"><td>{{.No}}</td><td>{{.Description}}</td><td class="num">{{.Quantity}}</td><td class="num">{{.UnitPrice}}</td><td class="num">{{.Amount}}</td></tr>
{{else}}<tr><td colspan="5">No charges in this period.</td></tr>
{{end}}</tbody>
</table>
<table class="totals">
<tr><td>Subtotal</td><td class="num">{{.Subtotal}} {{.Inv.Currency}}</td></tr>
<tr><td>Tax ({{.TaxRate}})</td><td class="num">{{.Tax}} {{.Inv.Currency}}</td></tr>
<tr class="due"><td>Amount due</td><td class="num">{{.AmountDue}} {{.Inv.Currency}}</td></tr>
</table>
{{with .Inv.Note}}<p>{{.}}</p>
{{end}}{{if .Tags}}<h2>Value tags</h2>
<p class="note">{{.TagsNote}}</p>
<table class="tags">
<thead><tr><th>Tag</th><th class="num">Jobs</th><th class="num">Amount ({{.Inv.Currency}})</th></tr></thead>
<tbody>
{{range .Tags}}<tr><td>{{.Tag}}</td><td class="num">{{.Jobs}}</td><td class="num">{{.Amount}}</td></tr>
{{end}}</tbody>
</table>
{{end}}<p class="note">{{.DisplayNote}}</p>
</body></html>
`))

// PDF layout, in millimetres on A4 portrait.
const (
	pdfMargin = 15.0
	pdfLineH  = 4.6
	pdfBottom = 18.0 // room kept for the page footer
)

// pdfColumn is one column of a PDF table.
type pdfColumn struct {
	title string
	w     float64
	align string // "L" or "R"
	wrap  bool   // the text wraps onto several lines
}

// pdfWriter draws tables on an fpdf document, breaking pages before a row
// that does not fit and repeating the table's header on the new page.
type pdfWriter struct {
	pdf *fpdf.Fpdf
	tr  func(string) string
}

// header draws cols' titles as a shaded row.
func (p *pdfWriter) header(cols []pdfColumn) {
	p.pdf.SetFont("Helvetica", "B", 9)
	p.pdf.SetFillColor(235, 235, 235)
	for _, c := range cols {
		p.pdf.CellFormat(c.w, pdfLineH+1.4, p.tr(c.title), "", 0, c.align, true, 0, "")
	}
	p.pdf.Ln(-1)
	p.pdf.SetFont("Helvetica", "", 9)
}

// fits breaks the page when h more millimetres do not fit on it, and
// reports whether it did.
func (p *pdfWriter) fits(h float64) bool {
	_, ph := p.pdf.GetPageSize()
	if p.pdf.GetY()+h <= ph-pdfBottom {
		return true
	}
	p.pdf.AddPage()
	return false
}

// table draws rows under cols' header, wrapping the wrap columns and
// repeating the header after each page break.
func (p *pdfWriter) table(cols []pdfColumn, rows [][]string) {
	p.fits(2 * (pdfLineH + 1.4))
	p.header(cols)
	for _, row := range rows {
		cells := make([][]string, len(cols))
		n := 1
		for i, c := range cols {
			txt := p.tr(row[i])
			if c.wrap {
				for _, l := range p.pdf.SplitLines([]byte(txt), c.w) {
					cells[i] = append(cells[i], string(l))
				}
			} else {
				cells[i] = []string{txt}
			}
			n = max(n, len(cells[i]))
		}
		h := float64(n)*pdfLineH + 1
		if !p.fits(h) {
			p.header(cols)
		}
		x, y := p.pdf.GetX(), p.pdf.GetY()
		for i, c := range cols {
			for j, l := range cells[i] {
				p.pdf.SetXY(x, y+0.5+float64(j)*pdfLineH)
				p.pdf.CellFormat(c.w, pdfLineH, l, "", 0, c.align, false, 0, "")
			}
			x += c.w
		}
		p.pdf.SetDrawColor(210, 210, 210)
		p.pdf.Line(pdfMargin, y+h, x, y+h)
		p.pdf.SetXY(pdfMargin, y+h)
	}
	p.pdf.SetDrawColor(0, 0, 0)
}

// WritePDF writes inv as an A4 PDF with the same content as WriteHTML.
// It uses a core font (Helvetica, Windows-1252): characters it cannot
// encode print as "?". Long invoices break across pages, the lines
// table's header repeated on each.
func (inv *Invoice) WritePDF(w io.Writer) error {
	pdf := fpdf.New("P", "mm", "A4", "")
	tr := pdf.UnicodeTranslatorFromDescriptor("")
	p := &pdfWriter{pdf: pdf, tr: tr}
	pdf.SetMargins(pdfMargin, pdfMargin, pdfMargin)
	pdf.SetAutoPageBreak(true, pdfBottom)
	pdf.SetTitle("Invoice "+inv.Number, true)
	pdf.SetCreator("zerolayer billing", true)
	pdf.SetCreationDate(inv.IssuedAt)
	pdf.SetModificationDate(inv.IssuedAt)
	pdf.SetCatalogSort(true)
	pdf.AliasNbPages("{nb}")
	pdf.SetFooterFunc(func() {
		pdf.SetY(-12)
		pdf.SetFont("Helvetica", "", 8)
		pdf.SetTextColor(110, 110, 110)
		pdf.CellFormat(0, 4, tr(fmt.Sprintf("Invoice %s, page %d of {nb}", inv.Number, pdf.PageNo())), "", 0, "R", false, 0, "")
		pdf.SetTextColor(0, 0, 0)
	})
	pdf.AddPage()
	pw, _ := pdf.GetPageSize()
	width := pw - 2*pdfMargin

	// Title and invoice details on the left, bill-to on the right.
	pdf.SetFont("Helvetica", "B", 20)
	pdf.CellFormat(0, 10, "Invoice", "", 1, "L", false, 0, "")
	top := pdf.GetY() + 2
	pdf.SetY(top)
	pdf.SetFont("Helvetica", "", 10)
	for _, kv := range [][2]string{
		{"Number", inv.Number}, {"Issue date", inv.issued()}, {"Due date", inv.DueAt},
		{"Period", inv.Period}, {"Currency", inv.Currency},
	} {
		pdf.CellFormat(25, 5, tr(kv[0]), "", 0, "L", false, 0, "")
		pdf.CellFormat(60, 5, tr(kv[1]), "", 1, "L", false, 0, "")
	}
	left := pdf.GetY()
	billX := pdfMargin + width/2 + 10
	pdf.SetXY(billX, top)
	pdf.SetFont("Helvetica", "B", 10)
	pdf.CellFormat(0, 5, "Bill to", "", 2, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 10)
	bill := append([]string{inv.customerName()}, inv.addressLines()...)
	if inv.Customer.Email != "" {
		bill = append(bill, inv.Customer.Email)
	}
	if inv.Customer.TaxID != "" {
		bill = append(bill, "Tax ID: "+inv.Customer.TaxID)
	}
	for _, l := range bill {
		pdf.MultiCell(pdfMargin+width-billX, 5, tr(l), "", "L", false)
		pdf.SetX(billX)
	}
	pdf.SetXY(pdfMargin, max(left, pdf.GetY())+6)

	// The lines.
	cols := []pdfColumn{
		{"#", 8, "L", false},
		{"Description", width - 8 - 34 - 30 - 28, "L", true},
		{"Quantity", 34, "R", false},
		{"Unit price", 30, "R", false},
		{"Amount (" + inv.Currency + ")", 28, "R", false},
	}
	rows := make([][]string, 0, len(inv.Lines))
	for _, l := range inv.Lines {
		rows = append(rows, []string{strconv.Itoa(l.No), l.Description, quantity(l), unitPrice(l), inv.fixed(l.AmountDisplay)})
	}
	if len(rows) == 0 {
		rows = append(rows, []string{"", "No charges in this period.", "", "", ""})
	}
	p.table(cols, rows)

	// The totals, right-aligned under the amount column.
	pdf.Ln(3)
	p.fits(3*6 + 2)
	labelX := pdfMargin + width - 28 - 60
	for i, t := range [][2]string{
		{"Subtotal", inv.fixed(inv.SubtotalDisplay)},
		{"Tax (" + inv.taxPercent() + ")", inv.fixed(inv.TaxDisplay)},
		{"Amount due", inv.fixed(inv.AmountDue)},
	} {
		if i == 2 {
			pdf.SetFont("Helvetica", "B", 10)
			pdf.Line(labelX, pdf.GetY(), pdfMargin+width, pdf.GetY())
		} else {
			pdf.SetFont("Helvetica", "", 10)
		}
		pdf.SetX(labelX)
		pdf.CellFormat(60, 6, tr(t[0]), "", 0, "L", false, 0, "")
		pdf.CellFormat(28, 6, tr(t[1]+" "+inv.Currency), "", 1, "R", false, 0, "")
	}
	pdf.SetFont("Helvetica", "", 10)
	if inv.Note != "" {
		pdf.Ln(3)
		pdf.MultiCell(width, 5, tr(inv.Note), "", "L", false)
	}

	// The value tags.
	if len(inv.Tags) > 0 {
		pdf.Ln(5)
		p.fits(6 + 10 + 2*(pdfLineH+1.4))
		pdf.SetFont("Helvetica", "B", 11)
		pdf.CellFormat(0, 6, "Value tags", "", 1, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 9)
		pdf.MultiCell(width, pdfLineH, tr(tagsNote), "", "L", false)
		pdf.Ln(1)
		tagRows := make([][]string, 0, len(inv.Tags))
		for _, t := range inv.Tags {
			tagRows = append(tagRows, []string{t.Tag, itoa(t.Jobs), DisplayAmount(t.Amount, inv.Currency)})
		}
		p.table([]pdfColumn{
			{"Tag", width - 30 - 40, "L", true},
			{"Jobs", 30, "R", false},
			{"Amount (" + inv.Currency + ")", 40, "R", false},
		}, tagRows)
	}

	pdf.Ln(5)
	p.fits(10)
	pdf.SetFont("Helvetica", "I", 9)
	pdf.MultiCell(width, pdfLineH, tr(displayNote), "", "L", false)

	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return fmt.Errorf("render PDF: %w", err)
	}
	_, err := buf.WriteTo(w)
	return err
}
