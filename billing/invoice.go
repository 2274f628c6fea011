package billing

import (
	"time"

	"github.com/shopspring/decimal"
)

// Customer is the billing details of a tenant, as printed on its
// invoices (each invoice keeps a copy as they were when it was issued).
type Customer struct {
	// Name is the legal name billed; the tenant id when not set.
	Name string `json:"name"`
	// Address is the postal address, lines separated by "\n".
	Address string `json:"address,omitempty"`
	// Email is where invoices are sent.
	Email string `json:"email,omitempty"`
	// TaxID is the customer's VAT or tax number.
	TaxID string `json:"tax_id,omitempty"`
}

// Invoice is a tenant's closed billing period: its usage charges per
// model, priority, batch or not, price book and dimension, its credits and
// adjustments, and tax. Amounts are exact decimals; AmountDue is Total
// rounded half to even at the currency's minor unit, and the *Display
// amounts are rounded so that what is printed adds up: the lines'
// AmountDisplay sum to SubtotalDisplay, and SubtotalDisplay + TaxDisplay
// = AmountDue.
type Invoice struct {
	// ID is the row id; Number the invoice number, as INV-2026-000001
	// (gapless per year of issue).
	ID     int64  `json:"id"`
	Number string `json:"number"`
	// Tenant and Period (2006-01) say whose month it bills.
	Tenant string `json:"tenant"`
	Period string `json:"period"`
	// Currency is the currency of every amount.
	Currency string `json:"currency"`
	// IssuedAt is when the period was closed; DueAt the payment date
	// (2006-01-02), IssuedAt plus the tenant's payment terms.
	IssuedAt time.Time `json:"issued_at"`
	DueAt    string    `json:"due_at"`
	// Customer is the tenant's billing details at issue.
	Customer Customer `json:"customer"`
	// TaxRate is the tenant's tax rate at issue (0.2 is 20 %).
	TaxRate decimal.Decimal `json:"tax_rate"`
	// Subtotal is the sum of the lines' Amount, exact; Tax is Subtotal ×
	// TaxRate, exact; Total is Subtotal + Tax.
	Subtotal decimal.Decimal `json:"subtotal_exact"`
	Tax      decimal.Decimal `json:"tax_exact"`
	Total    decimal.Decimal `json:"total_exact"`
	// AmountDue is Total rounded at the currency's minor unit (RoundInvoice).
	AmountDue decimal.Decimal `json:"amount_due"`
	// SubtotalDisplay is Subtotal rounded; TaxDisplay is AmountDue −
	// SubtotalDisplay.
	SubtotalDisplay decimal.Decimal `json:"subtotal"`
	TaxDisplay      decimal.Decimal `json:"tax"`
	// Jobs counts the charges billed.
	Jobs int64 `json:"jobs"`
	// Lines are the invoice's lines, usage first, then credits and
	// adjustments.
	Lines []InvoiceLine `json:"lines"`
	// Tags sums the usage charges per value tag, for information: a job
	// with several tags counts in each, so they do not add up.
	Tags []TagTotal `json:"tags"`
	// ClosedBy is who closed the period; Note says anything special (a
	// period closed before its end).
	ClosedBy string `json:"closed_by"`
	Note     string `json:"note,omitempty"`
}

// The kinds of invoice line.
const (
	LineUsage      = "usage"
	LineCredit     = "credit"
	LineAdjustment = "adjustment"
)

// The dimensions of a usage line, with their units.
const (
	DimInput       = "input"        // uncached input tokens
	DimCachedInput = "cached_input" // cached input tokens
	DimOutput      = "output"       // output tokens
	DimTTFT        = "ttft"         // milliseconds to first token
	DimTool        = "tool"         // milliseconds of tool execution
)

// InvoiceLine is one line of an invoice. A usage line bills one dimension
// of the charges of one model, priority, batch or not, and price book:
// Quantity (in Unit) × UnitPrice = Amount, where UnitPrice is the book's
// price times its multiplier for the priority and batch. A credit or
// adjustment line carries its credit's amount and reason.
type InvoiceLine struct {
	// No numbers the lines from 1.
	No int `json:"no"`
	// Kind is usage, credit or adjustment.
	Kind string `json:"kind"`
	// Description is the line's text, as printed.
	Description string `json:"description"`
	// Model, Priority and Batch say which jobs a usage line bills.
	Model    string `json:"model,omitempty"`
	Priority string `json:"priority,omitempty"`
	Batch    bool   `json:"batch,omitempty"`
	// PriceBookID is the book that priced them; PriceBook names it
	// ("pb7 acme/tiny v2").
	PriceBookID int64  `json:"price_book_id,omitempty"`
	PriceBook   string `json:"price_book,omitempty"`
	// Dimension is one of the Dim constants.
	Dimension string `json:"dimension,omitempty"`
	// Jobs counts the jobs billed on the line.
	Jobs int64 `json:"jobs,omitempty"`
	// Quantity, in Unit (tokens or ms), at UnitPrice each.
	Quantity  decimal.Decimal `json:"quantity"`
	Unit      string          `json:"unit,omitempty"`
	UnitPrice decimal.Decimal `json:"unit_price"`
	// Amount is the line's exact amount; AmountDisplay the rounded one
	// printed (see Invoice).
	Amount        decimal.Decimal `json:"amount_exact"`
	AmountDisplay decimal.Decimal `json:"amount"`
	// CreditID is the credit a credit or adjustment line comes from.
	CreditID int64 `json:"credit_id,omitempty"`
}

// TagTotal is the usage charges of one value tag in a period.
type TagTotal struct {
	Tag    string          `json:"tag"`
	Jobs   int64           `json:"jobs"`
	Amount decimal.Decimal `json:"amount_exact"`
}

// Credit is a credit (it lowers an invoice: Amount < 0) or an adjustment
// (either sign) of a tenant's open period, with who added it and why.
type Credit struct {
	ID     int64  `json:"id"`
	Tenant string `json:"tenant"`
	// Period is the month (2006-01) whose invoice it goes on.
	Period string `json:"period"`
	// Kind is "credit" or "adjustment".
	Kind string `json:"kind"`
	// Amount is what it adds to the invoice, exact: negative for a credit.
	Amount   decimal.Decimal `json:"amount"`
	Currency string          `json:"currency"`
	Reason   string          `json:"reason"`
	// CreatedBy is who added it.
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// Invoice is the number of the invoice it is on; "" while the period
	// is open.
	Invoice string `json:"invoice,omitempty"`
}
