package finance

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// testInvoice builds an invoice by hand: five usage lines of different
// models, priorities and dimensions, a credit, 20 % tax, and display
// amounts from price.DisplayAmounts, as closing a period does.
func testInvoice(t testing.TB) *Invoice {
	t.Helper()
	d := decimal.RequireFromString
	inv := &Invoice{
		ID: 7, Number: "INV-2026-000042", Tenant: "acme", Period: "2026-11", Currency: "EUR",
		IssuedAt: time.Date(2026, 12, 1, 0, 5, 0, 0, time.UTC), DueAt: "2026-12-31",
		Customer: Customer{Name: "Acme Widgets Ltd", Address: "12 Long Road\nSpringfield 4021", Email: "billing@acme.example", TaxID: "GB123456789"},
		Supplier: testSupplier,
		TaxRate:  d("0.2"), TaxRule: TaxPerInvoice, Jobs: 1234, ClosedBy: "ops", Note: "closed early, at 2026-11-20T10:00:00Z",
		Tags: []TagTotal{{Tag: "team-search", Jobs: 800, Amount: d("9.8765432")}, {Tag: "prod", Jobs: 1100, Amount: d("14.004")}},
	}
	usage := []struct {
		model, prio, dim, unit string
		batch                  bool
		qty, price             string
	}{
		{"acme/tiny", "normal", DimInput, "tokens", false, "1234567", "0.000003"},
		{"acme/tiny", "normal", DimOutput, "tokens", false, "345678", "0.000015"},
		{"acme/large", "high", DimInput, "tokens", false, "987654", "0.0000045"},
		{"acme/large", "low", DimCachedInput, "tokens", true, "2222222", "0.00000075"},
		{"acme/large", "high", DimTTFT, "ms", false, "123456.5", "0.0000003"},
	}
	for i, u := range usage {
		q, p := d(u.qty), d(u.price)
		desc := fmt.Sprintf("%s, %s priority, %s (× 1.5 surcharge)", u.model, u.prio, u.dim)
		if u.batch {
			desc += ", batch"
		}
		inv.Lines = append(inv.Lines, InvoiceLine{
			No: i + 1, Kind: LineUsage, Description: desc, Model: u.model, Priority: u.prio, Batch: u.batch,
			PriceBookID: int64(i + 1), PriceBook: fmt.Sprintf("pb%d acme/large v2", i+1), Dimension: u.dim,
			Jobs: int64(100 + i), Quantity: q, Unit: u.unit, UnitPrice: p, Amount: q.Mul(p),
		})
	}
	inv.Lines = append(inv.Lines, InvoiceLine{
		No: len(inv.Lines) + 1, Kind: LineCredit, Description: "Credit: outage on 2026-11-03 (€ goodwill)",
		Quantity: d("1"), UnitPrice: d("-1.23"), Amount: d("-1.23"), CreditID: 3, AddedBy: "finance-ops",
	})
	fillTotals(inv)
	return inv
}

// testSupplier is the seller of the test invoices.
var testSupplier = Supplier{Name: "Zerolayer Compute GmbH", Address: "Invalidenstraße 1\n10115 Berlin\nGermany",
	TaxID: "DE999999999", Email: "billing@zerolayer.example", PaymentInstructions: "IBAN DE00 0000 0000 0000 0000 00, BIC TESTDEFF"}

// fillTotals sets inv's totals from its lines as closing a period does,
// with no balance from earlier credit notes.
func fillTotals(inv *Invoice) {
	inv.finish(decimal.Zero)
	inv.PaymentTerms = paymentTerms(inv, 30)
}

// longInvoice is an invoice of n usage lines.
func longInvoice(t testing.TB, n int) *Invoice {
	inv := testInvoice(t)
	base := inv.Lines[0]
	inv.Lines = nil
	for i := range n {
		l := base
		l.No = i + 1
		l.Description = fmt.Sprintf("acme/model-%03d, normal priority, input tokens, a description long enough to wrap onto a second line of the description column", i)
		l.Quantity = decimal.NewFromInt(int64(1000 * (i + 1)))
		l.Amount = l.Quantity.Mul(l.UnitPrice)
		inv.Lines = append(inv.Lines, l)
	}
	fillTotals(inv)
	return inv
}

// pdfText returns the text of the PDF at path (pdftotext -layout), or
// skips the test when pdftotext is not installed.
func pdfText(t *testing.T, path string) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed")
	}
	out, err := exec.Command(bin, "-layout", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext %s: %v", path, err)
	}
	return string(out)
}

// wantInvoiceText checks that text (an invoice as printed) has its
// number, customer, lines, tax and amount due.
func wantInvoiceText(t *testing.T, inv *Invoice, text string) {
	t.Helper()
	// Layout may break a wrapped description anywhere: compare with runs
	// of blanks squeezed and check the description's words in order.
	flat := strings.Join(strings.Fields(text), " ")
	want := []string{inv.Number, inv.Customer.Name, "12 Long Road", "Springfield 4021", inv.Customer.TaxID,
		"Tax (20 %)", inv.TaxDisplay.StringFixed(2), "Amount due", inv.AmountDue.StringFixed(2) + " EUR",
		"Subtotal", inv.SubtotalDisplay.StringFixed(2), inv.DueAt, "2026-12-01",
		"From", "Zerolayer Compute GmbH", "10115 Berlin", "DE999999999", "IBAN DE00 0000 0000 0000 0000 00",
		"Payment due within 30 days", "rounded half to even to 0.01 EUR once per document",
		"quantity × unit price, rounded half to even to 0.01 EUR"}
	for _, l := range inv.Lines {
		want = append(want, l.AmountDisplay.StringFixed(2))
	}
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("printed invoice lacks %q:\n%s", w, text)
		}
	}
	for _, l := range inv.Lines {
		for _, word := range strings.Fields(l.Description) {
			if !strings.Contains(flat, word) {
				t.Errorf("printed invoice lacks %q of line %d's description %q", word, l.No, l.Description)
			}
		}
	}
	if !strings.Contains(flat, "×") || !strings.Contains(flat, "€") {
		t.Errorf("printed invoice lost × or €:\n%s", text)
	}
	wantNoInternal(t, inv, text)
}

// wantNoInternal checks that a customer document shows nothing internal:
// the note, the price books, who added a credit, the value tags.
func wantNoInternal(t *testing.T, inv *Invoice, text string) {
	t.Helper()
	bad := []string{"closed early", "added by", "finance-ops", "pb1", "price book", "team-search", "high_latency_risk"}
	if inv.Note != "" {
		bad = append(bad, inv.Note)
	}
	for _, l := range inv.Lines {
		if l.PriceBook != "" {
			bad = append(bad, l.PriceBook)
		}
	}
	for _, b := range bad {
		if strings.Contains(text, b) {
			t.Errorf("customer document shows internal text %q:\n%s", b, text)
		}
	}
}

func TestInvoiceAmountsAddUp(t *testing.T) {
	inv := testInvoice(t)
	sum := decimal.Zero
	for _, l := range inv.Lines {
		sum = sum.Add(l.AmountDisplay)
	}
	if !sum.Equal(inv.SubtotalDisplay) || !inv.SubtotalDisplay.Add(inv.TaxDisplay).Equal(inv.AmountDue) {
		t.Fatalf("display amounts do not add up: lines %s, subtotal %s, tax %s, due %s", sum, inv.SubtotalDisplay, inv.TaxDisplay, inv.AmountDue)
	}
}

func TestParseInvoiceFormat(t *testing.T) {
	for _, s := range []string{"html", "pdf", "csv", "json"} {
		if f, err := ParseInvoiceFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseInvoiceFormat(%q) = %q, %v", s, f, err)
		}
	}
	for _, s := range []string{"table", "", "PDF", "xml"} {
		if _, err := ParseInvoiceFormat(s); !errors.Is(err, ErrInvalidFormat) {
			t.Errorf("ParseInvoiceFormat(%q): %v, want ErrInvalidFormat", s, err)
		}
	}
	if err := testInvoice(t).Write(&bytes.Buffer{}, FormatTable); !errors.Is(err, ErrInvalidFormat) {
		t.Errorf("Write(table): %v, want ErrInvalidFormat", err)
	}
}

func TestInvoicePDF(t *testing.T) {
	inv := testInvoice(t)
	var buf bytes.Buffer
	if err := inv.Write(&buf, FormatPDF); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("%PDF-")) {
		t.Fatalf("not a PDF: %q", buf.Bytes()[:min(20, buf.Len())])
	}
	path := filepath.Join(t.TempDir(), "invoice.pdf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	wantInvoiceText(t, inv, pdfText(t, path))
}

// pdfPages counts the pages of the PDF at path: with pdfinfo when
// installed, else by its page objects.
func pdfPages(t *testing.T, path string, data []byte) int {
	t.Helper()
	if bin, err := exec.LookPath("pdfinfo"); err == nil {
		out, err := exec.Command(bin, path).Output()
		if err != nil {
			t.Fatalf("pdfinfo %s: %v", path, err)
		}
		m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("pdfinfo printed no page count:\n%s", out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return len(regexp.MustCompile(`/Type\s*/Page\b`).FindAll(data, -1))
}

func TestInvoicePDFLong(t *testing.T) {
	inv := longInvoice(t, 120)
	var buf bytes.Buffer
	if err := inv.WritePDF(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "long.pdf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pages := pdfPages(t, path, buf.Bytes())
	if pages < 2 {
		t.Fatalf("a 120-line invoice printed on %d page(s)", pages)
	}
	if _, err := exec.LookPath("pdftotext"); err != nil {
		return
	}
	text := pdfText(t, path)
	// Every line printed, the header repeated on every page, nothing
	// lost at a page break.
	flat := strings.Join(strings.Fields(text), " ")
	for _, l := range inv.Lines {
		if !strings.Contains(flat, fmt.Sprintf("acme/model-%03d,", l.No-1)) {
			t.Errorf("line %d missing from the PDF", l.No)
		}
	}
	if n := strings.Count(text, "Unit price"); n != pages {
		t.Errorf("lines table header printed %d times on %d pages", n, pages)
	}
	if !strings.Contains(flat, fmt.Sprintf("page %d of %d", pages, pages)) {
		t.Errorf("no page footer \"page %d of %d\":\n%s", pages, pages, text)
	}
	if !strings.Contains(flat, inv.AmountDue.StringFixed(2)+" EUR") {
		t.Errorf("amount due %s missing", inv.AmountDue.StringFixed(2))
	}
}

// chromium returns the headless browser's path, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed")
	}
	return bin
}

// runChromium runs headless chromium with args after the common flags,
// for at most a minute.
func runChromium(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, out)
	}
}

func TestInvoiceHTMLInBrowser(t *testing.T) {
	inv := testInvoice(t)
	var buf bytes.Buffer
	if err := inv.Write(&buf, FormatHTML); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, bad := range []string{"<script", "http://", "https://", "<link", "src="} {
		if strings.Contains(html, bad) {
			t.Errorf("invoice HTML is not self-contained: has %q", bad)
		}
	}
	bin := chromium(t)
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Skip("pdftotext not installed")
	}
	dir := t.TempDir()
	page, out := filepath.Join(dir, "invoice.html"), filepath.Join(dir, "invoice.pdf")
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runChromium(t, bin, "--print-to-pdf="+out, "--no-pdf-header-footer", "file://"+page)
	wantInvoiceText(t, inv, pdfText(t, out))
}

func TestInvoiceCSV(t *testing.T) {
	inv := testInvoice(t)
	var buf bytes.Buffer
	if err := inv.Write(&buf, FormatCSV); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(recs[0], ","), strings.Join(InvoiceCSVHeader, ","); got != want {
		t.Fatalf("header %s, want %s", got, want)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	if len(recs) != 1+len(inv.Lines)+4 {
		t.Fatalf("%d rows, want header, %d lines, subtotal, tax, total, amount due", len(recs), len(inv.Lines))
	}
	dec := func(row []string, name string) decimal.Decimal {
		t.Helper()
		v, err := decimal.NewFromString(row[col[name]])
		if err != nil {
			t.Fatalf("%s %q: %v", name, row[col[name]], err)
		}
		return v
	}
	exact, display := decimal.Zero, decimal.Zero
	for i, row := range recs[1 : 1+len(inv.Lines)] {
		l := inv.Lines[i]
		if row[col["document"]] != inv.Number || row[col["line"]] != strconv.Itoa(l.No) || row[col["line_kind"]] != l.Kind ||
			row[col["description"]] != l.Description || row[col["model"]] != l.Model || row[col["dimension"]] != l.Dimension {
			t.Errorf("row %d = %q, line %+v", i+1, row, l)
		}
		if !dec(row, "amount_exact").Equal(l.Amount) {
			t.Errorf("line %d amount_exact %s, want %s", l.No, row[col["amount_exact"]], l.Amount)
		}
		if a := row[col["amount"]]; len(a) < 3 || a[len(a)-3] != '.' {
			t.Errorf("line %d display amount %q not fixed to 2 decimals", l.No, a)
		}
		if q, p := dec(row, "quantity"), dec(row, "unit_price"); !dec(row, "amount").Equal(q.Mul(p).RoundBank(2)) {
			t.Errorf("line %d: %s × %s rounded is not %s", l.No, q, p, row[col["amount"]])
		}
		exact = exact.Add(dec(row, "amount_exact"))
		display = display.Add(dec(row, "amount"))
	}
	tail := recs[1+len(inv.Lines):]
	for i, kind := range []string{"subtotal", "tax", "total", "amount_due"} {
		if tail[i][col["line_kind"]] != kind {
			t.Fatalf("row %q, want kind %s", tail[i], kind)
		}
	}
	sub, tax, total := tail[0], tail[1], tail[2]
	if !exact.Equal(dec(sub, "amount_exact")) {
		t.Errorf("lines' amount_exact sum to %s, subtotal row says %s", exact, sub[col["amount_exact"]])
	}
	if !display.Equal(dec(sub, "amount")) {
		t.Errorf("lines' display amounts sum to %s, subtotal row says %s", display, sub[col["amount"]])
	}
	if !dec(sub, "amount").Add(dec(tax, "amount")).Equal(dec(total, "amount")) {
		t.Errorf("subtotal %s + tax %s != total %s", sub[col["amount"]], tax[col["amount"]], total[col["amount"]])
	}
	if total[col["amount"]] != inv.AmountDue.StringFixed(2) || !dec(total, "amount_exact").Equal(inv.Total) || tail[3][col["amount"]] != inv.AmountDue.StringFixed(2) {
		t.Errorf("total row %q, want amount due %s and exact total %s", total, inv.AmountDue, inv.Total)
	}
	if want := dec(sub, "amount").Mul(inv.TaxRate).RoundBank(2); !dec(tax, "amount").Equal(want) {
		t.Errorf("tax %s, want 20 %% of the subtotal %s rounded: %s", tax[col["amount"]], sub[col["amount"]], want)
	}
	if strings.Contains(text, "pb1") || strings.Contains(text, "finance-ops") {
		t.Errorf("the CSV shows internal text:\n%s", text)
	}
	if !dec(tax, "amount_exact").Equal(inv.Tax) {
		t.Errorf("tax row %q, want exact tax %s", tax, inv.Tax)
	}
}

func TestInvoiceJSON(t *testing.T) {
	inv := testInvoice(t)
	var buf bytes.Buffer
	if err := inv.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\n  \"number\": \"INV-2026-000042\"") {
		t.Errorf("JSON not indented:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), `"amount_exact": "-1.23"`) {
		t.Errorf("amounts not decimal strings:\n%s", buf.String())
	}
	var back Invoice
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := back.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != buf.String() {
		t.Errorf("JSON does not round-trip:\n%s\nthen\n%s", buf.String(), again.String())
	}
	if !back.Total.Equal(inv.Total) || !back.Lines[2].UnitPrice.Equal(inv.Lines[2].UnitPrice) || back.Customer != inv.Customer {
		t.Errorf("decoded %+v, want %+v", back, inv)
	}
}
