package finance

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
	"github.com/zerolayer/zerolayer/billing/price"
)

// FormatPDF is a printable A4 document; only invoices are written in it.
const FormatPDF Format = "pdf"

// roundingNote states how a document's line amounts are rounded, as
// printed on it.
func (inv *Invoice) roundingNote() string {
	if inv.TaxRule == taxLegacy {
		return "Amounts are rounded for display; exact amounts are in the CSV and JSON."
	}
	n := price.MinorUnits(inv.Currency)
	return fmt.Sprintf("Each line's amount is its quantity × unit price, rounded half to even to %s %s; the subtotal is the sum of the lines.",
		decimal.New(1, -n).StringFixed(n), inv.Currency)
}

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
// named *_exact hold exact decimals; amount holds the amount charged
// (a line's is amount_exact rounded; see Invoice).
var InvoiceCSVHeader = []string{
	"document", "kind", "tenant", "period", "currency", "line", "line_kind", "description",
	"model", "priority", "batch", "dimension", "jobs",
	"quantity", "unit", "unit_price", "amount_exact", "amount",
}

// WriteCSV writes inv as CSV for accounting: InvoiceCSVHeader, one row per
// line, then the totals, each a row of its own line_kind: subtotal, tax,
// total, balance_applied (an invoice that takes from the tenant's
// balance), balance_carried (a credit note) and amount_due. It holds what
// the customer's documents print, nothing internal (no price book).
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
			inv.Number, inv.Kind, inv.Tenant, inv.Period, inv.Currency, strconv.Itoa(l.No), l.Kind, l.Description,
			l.Model, l.Priority, batch, l.Dimension, jobs,
			l.Quantity.String(), l.Unit, l.UnitPrice.String(), l.Amount.String(), fixed(l.AmountDisplay),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	type total struct {
		kind, desc string
		exact      string
		amount     decimal.Decimal
	}
	tail := []total{
		{"subtotal", "Subtotal", inv.Subtotal.String(), inv.SubtotalDisplay},
		{"tax", "Tax (" + inv.taxPercent() + ")", inv.Tax.String(), inv.TaxDisplay},
		{"total", "Total", inv.Total.String(), inv.TotalDisplay},
	}
	if inv.BalanceApplied.IsPositive() {
		tail = append(tail, total{"balance_applied", "Credit balance applied", "", inv.BalanceApplied.Neg()})
	}
	if inv.BalanceCarried.IsPositive() {
		tail = append(tail, total{"balance_carried", "Credited to your account", "", inv.BalanceCarried})
	}
	tail = append(tail, total{"amount_due", "Amount due", "", inv.AmountDue})
	for _, t := range tail {
		row := make([]string, len(InvoiceCSVHeader))
		row[0], row[1], row[2], row[3], row[4] = inv.Number, inv.Kind, inv.Tenant, inv.Period, inv.Currency
		row[6], row[7] = t.kind, t.desc
		row[16], row[17] = t.exact, fixed(t.amount)
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
	return d.StringFixedBank(price.MinorUnits(inv.Currency))
}

// taxPercent prints the tax rate as a percentage: "20 %".
func (inv *Invoice) taxPercent() string {
	return inv.TaxRate.Mul(decimal.NewFromInt(100)).String() + " %"
}

// customerName is the name billed: the customer's, or the tenant id.
func (inv *Invoice) customerName() string { return cmp.Or(inv.Customer.Name, inv.Tenant) }

// addressLines splits an address into its non-empty lines.
func addressLines(address string) []string {
	var out []string
	for l := range strings.SplitSeq(address, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// partyBlock is what a document prints of a party: name, address lines,
// email, tax id.
func partyBlock(name, address, email, taxID string) []string {
	out := append([]string{name}, addressLines(address)...)
	if email != "" {
		out = append(out, email)
	}
	if taxID != "" {
		out = append(out, "Tax ID: "+taxID)
	}
	return out
}

// supplierBlock and customerBlock are the seller's and the buyer's blocks.
func (inv *Invoice) supplierBlock() []string {
	s := inv.Supplier
	if s.Name == "" {
		return nil
	}
	return partyBlock(s.Name, s.Address, s.Email, s.TaxID)
}

func (inv *Invoice) customerBlock() []string {
	c := inv.Customer
	return partyBlock(inv.customerName(), c.Address, c.Email, c.TaxID)
}

// meta is the document's details, as label and value.
func (inv *Invoice) meta() [][2]string {
	out := [][2]string{{"Number", inv.Number}, {"Issue date", inv.issued()}}
	if inv.Kind != KindCreditNote {
		out = append(out, [2]string{"Due date", inv.DueAt})
	}
	return append(out, [2]string{"Period", inv.Period}, [2]string{"Currency", inv.Currency})
}

// totals is the document's totals block, as label and amount; the last
// is the bottom line.
func (inv *Invoice) totals() [][2]string {
	out := [][2]string{
		{"Subtotal", inv.fixed(inv.SubtotalDisplay)},
		{"Tax (" + inv.taxPercent() + ")", inv.fixed(inv.TaxDisplay)},
	}
	if inv.Kind == KindCreditNote {
		return append(out, [2]string{"Total credited", inv.fixed(inv.TotalDisplay)})
	}
	if inv.BalanceApplied.IsPositive() {
		out = append(out, [2]string{"Total", inv.fixed(inv.TotalDisplay)},
			[2]string{"Credit balance applied", inv.fixed(inv.BalanceApplied.Neg())})
	}
	return append(out, [2]string{"Amount due", inv.fixed(inv.AmountDue)})
}

// notes are the sentences printed under the totals: the tax rule, the
// rounding, the payment terms and instructions.
func (inv *Invoice) notes() []string {
	var out []string
	for _, n := range []string{inv.TaxRuleText(), inv.roundingNote(), inv.PaymentTerms} {
		if n != "" {
			out = append(out, n)
		}
	}
	if p := inv.Supplier.PaymentInstructions; p != "" && inv.AmountDue.IsPositive() {
		out = append(out, "How to pay: "+p)
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

// unitPrice prints a line's exact unit price (a credit's, an amount of
// money, to the minor unit); empty for a line without one.
func (inv *Invoice) unitPrice(l InvoiceLine) string {
	switch {
	case l.Kind != LineUsage && l.UnitPrice.IsZero():
		return ""
	case l.Kind != LineUsage:
		return inv.fixed(l.UnitPrice)
	}
	return l.UnitPrice.String()
}

// invoiceView is what the HTML template prints: every amount already
// formatted, nothing internal.
type invoiceView struct {
	Inv      *Invoice
	Title    string
	Supplier []string
	Customer []string
	Meta     [][2]string
	Lines    []invoiceLineView
	Totals   [][2]string
	Notes    []string
}

type invoiceLineView struct {
	No          int
	Kind        string
	Description string
	Quantity    string
	UnitPrice   string
	Amount      string
}

func (inv *Invoice) view() invoiceView {
	v := invoiceView{
		Inv: inv, Title: inv.Title(), Supplier: inv.supplierBlock(), Customer: inv.customerBlock(), Meta: inv.meta(),
		Totals: inv.totals(), Notes: inv.notes(),
	}
	for _, l := range inv.Lines {
		v.Lines = append(v.Lines, invoiceLineView{
			No: l.No, Kind: l.Kind, Description: l.Description, Quantity: quantity(l),
			UnitPrice: inv.unitPrice(l), Amount: inv.fixed(l.AmountDisplay),
		})
	}
	return v
}

// WriteHTML writes inv as a self-contained printable HTML page (no
// scripts, no external resources), for the customer: the supplier and
// the customer, the document's details, the lines with their rounded
// amounts and exact unit prices, the totals, how tax and rounding are
// done, and how to pay. Nothing internal (see Invoice).
func (inv *Invoice) WriteHTML(w io.Writer) error { return invoicePage.Execute(w, inv.view()) }

var invoicePage = template.Must(template.New("invoice").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}} {{.Inv.Number}}</title>
<style>
@page{size:A4;margin:15mm}
body{font:13px/1.4 system-ui,sans-serif;margin:2em auto;max-width:48em;color:#222}
h1{font-size:1.8em;margin:0 0 .4em}
h2{font-size:1.05em;margin:1.4em 0 .4em}
.head{display:flex;justify-content:space-between;align-items:flex-start;gap:2em}
table{border-collapse:collapse}
table.meta td{padding:.05em .8em .05em 0}
table.lines{width:100%;margin-top:.6em}
table.lines th,table.lines td{padding:.3em .5em;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
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
<div><h1>{{.Title}}</h1>
<table class="meta">
{{range .Meta}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table></div>
{{if .Supplier}}<div class="from"><h2>From</h2>
{{range .Supplier}}<div>{{.}}</div>
{{end}}</div>
{{end}}<div class="to"><h2>Bill to</h2>
{{range .Customer}}<div>{{.}}</div>
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
{{range $i, $t := .Totals}}<tr{{if eq (len (slice $.Totals $i)) 1}} class="due"{{end}}><td>{{index $t 0}}</td><td class="num">{{index $t 1}} {{$.Inv.Currency}}</td></tr>
{{end}}</table>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}</body></html>
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
	pdf.SetTitle(inv.Title()+" "+inv.Number, true)
	pdf.SetCreator("zerolayer billing", true)
	pdf.SetCreationDate(inv.IssuedAt)
	pdf.SetModificationDate(inv.IssuedAt)
	pdf.SetCatalogSort(true)
	pdf.AliasNbPages("{nb}")
	pdf.SetFooterFunc(func() {
		pdf.SetY(-12)
		pdf.SetFont("Helvetica", "", 8)
		pdf.SetTextColor(110, 110, 110)
		left := inv.Supplier.Name
		if inv.Supplier.TaxID != "" {
			left += ", tax ID " + inv.Supplier.TaxID
		}
		pdf.CellFormat(0, 4, tr(left), "", 0, "L", false, 0, "")
		pdf.SetX(pdfMargin)
		pdf.CellFormat(0, 4, tr(fmt.Sprintf("%s %s, page %d of {nb}", inv.Title(), inv.Number, pdf.PageNo())), "", 0, "R", false, 0, "")
		pdf.SetTextColor(0, 0, 0)
	})
	pdf.AddPage()
	pw, _ := pdf.GetPageSize()
	width := pw - 2*pdfMargin

	// Title and details on the left, the supplier on the right; then
	// the customer.
	pdf.SetFont("Helvetica", "B", 20)
	pdf.CellFormat(0, 10, tr(inv.Title()), "", 1, "L", false, 0, "")
	top := pdf.GetY() + 2
	pdf.SetY(top)
	pdf.SetFont("Helvetica", "", 10)
	for _, kv := range inv.meta() {
		pdf.CellFormat(25, 5, tr(kv[0]), "", 0, "L", false, 0, "")
		pdf.CellFormat(60, 5, tr(kv[1]), "", 1, "L", false, 0, "")
	}
	left := pdf.GetY()
	colX := pdfMargin + width/2 + 10
	block := func(title string, lines []string, y float64) float64 {
		pdf.SetXY(colX, y)
		pdf.SetFont("Helvetica", "B", 10)
		pdf.CellFormat(0, 5, tr(title), "", 2, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 10)
		for _, l := range lines {
			pdf.SetX(colX)
			pdf.MultiCell(pdfMargin+width-colX, 5, tr(l), "", "L", false)
		}
		return pdf.GetY()
	}
	y := top
	if s := inv.supplierBlock(); s != nil {
		y = block("From", s, y) + 3
	}
	y = block("Bill to", inv.customerBlock(), y)
	pdf.SetXY(pdfMargin, max(left, y)+6)

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
		rows = append(rows, []string{strconv.Itoa(l.No), l.Description, quantity(l), inv.unitPrice(l), inv.fixed(l.AmountDisplay)})
	}
	if len(rows) == 0 {
		rows = append(rows, []string{"", "No charges in this period.", "", "", ""})
	}
	p.table(cols, rows)

	// The totals, right-aligned under the amount column.
	totals := inv.totals()
	pdf.Ln(3)
	p.fits(float64(len(totals))*6 + 2)
	labelX := pdfMargin + width - 28 - 60
	for i, t := range totals {
		if i == len(totals)-1 {
			pdf.SetFont("Helvetica", "B", 10)
			pdf.Line(labelX, pdf.GetY(), pdfMargin+width, pdf.GetY())
		} else {
			pdf.SetFont("Helvetica", "", 10)
		}
		pdf.SetX(labelX)
		pdf.CellFormat(60, 6, tr(t[0]), "", 0, "L", false, 0, "")
		pdf.CellFormat(28, 6, tr(t[1]+" "+inv.Currency), "", 1, "R", false, 0, "")
	}

	pdf.Ln(5)
	pdf.SetFont("Helvetica", "", 9)
	for _, n := range inv.notes() {
		p.fits(2 * pdfLineH)
		pdf.MultiCell(width, pdfLineH, tr(n), "", "L", false)
		pdf.Ln(1)
	}

	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return fmt.Errorf("render PDF: %w", err)
	}
	_, err := buf.WriteTo(w)
	return err
}
