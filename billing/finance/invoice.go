package finance

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

// Supplier is the seller printed on every invoice and credit note: who
// bills, where, under which tax number, and how to pay. It is configured
// once (SetSupplier; `zerolayer invoice supplier`), and each document
// keeps a copy as it was at issue.
type Supplier struct {
	// Name is the seller's legal name (required).
	Name string `json:"name"`
	// Address is the postal address, lines separated by "\n" (required).
	Address string `json:"address"`
	// TaxID is the seller's VAT or tax number.
	TaxID string `json:"tax_id,omitempty"`
	// Email is where customers write about invoices.
	Email string `json:"email,omitempty"`
	// PaymentInstructions says how to pay: bank account, payment link.
	PaymentInstructions string `json:"payment_instructions,omitempty"`
}

// one is the quantity of a credit line, and the tax rate of 100 %.
var one = decimal.NewFromInt(1)

// The kinds of billing document.
const (
	// KindInvoice is an invoice: its total is zero or more.
	KindInvoice = "invoice"
	// KindCreditNote is a month whose total is negative (a credit larger
	// than its usage): numbered in a series of its own (CN-2026-000001),
	// nothing to pay, its amount carried to the tenant's balance and
	// deducted from the next invoices in its currency.
	KindCreditNote = "credit_note"
)

// The tax rules: how the tax of a document is computed from its lines,
// each already rounded to the minor unit (price.RoundInvoice of quantity × unit
// price). Both round half to even at the currency's minor unit.
const (
	// TaxPerInvoice is tax = round(rate × subtotal), the subtotal being
	// the sum of the rounded lines.
	TaxPerInvoice = "invoice"
	// TaxPerLine is tax = Σ round(rate × line amount).
	TaxPerLine = "line"
	// taxLegacy marks the invoices issued before the rules (migration
	// 0010): exact amounts, the total rounded once.
	taxLegacy = "legacy"
)

// Invoice is one billing document of a tenant's closed month in one
// currency (a month that bills two currencies, late usage priced before a
// currency change, has one per currency): an invoice or, when its total is
// negative, a credit note (Kind). It holds the month's usage charges per
// model, priority, batch or not, price book and dimension, its credits and
// adjustments, and tax.
//
// The amounts charged are computed from rounded figures, so that every
// printed figure can be checked by hand: each line's AmountDisplay is
// Quantity × UnitPrice rounded half to even at the currency's minor unit;
// SubtotalDisplay is the sum of those; TaxDisplay is computed from them by
// TaxRule; TotalDisplay = SubtotalDisplay + TaxDisplay; AmountDue =
// TotalDisplay − BalanceApplied. The exact amounts of the ledger stay
// beside them: Subtotal (the lines' exact Amount, which is the month's
// charges and credits), Tax = Subtotal × TaxRate and Total = Subtotal +
// Tax; they differ from the charged amounts by the rounding only.
//
// Customer documents (HTML, PDF) print the charged amounts, the supplier
// and the customer, and nothing internal: Note, the price books, who
// added a credit and the value tags are in the JSON and the internal
// table view only.
type Invoice struct {
	// ID is the row id; Number the document number: INV-2026-000001 for
	// an invoice, CN-2026-000001 for a credit note (each gapless per year
	// of issue).
	ID     int64  `json:"id"`
	Number string `json:"number"`
	// Kind is KindInvoice or KindCreditNote.
	Kind string `json:"kind"`
	// Tenant and Period (2006-01) say whose month it bills.
	Tenant string `json:"tenant"`
	Period string `json:"period"`
	// Currency is the currency of every amount.
	Currency string `json:"currency"`
	// IssuedAt is when the period was closed; DueAt the payment date
	// (2006-01-02), IssuedAt plus the tenant's payment terms.
	IssuedAt time.Time `json:"issued_at"`
	DueAt    string    `json:"due_at"`
	// Supplier is the seller at issue; Customer the tenant's billing
	// details at issue.
	Supplier Supplier `json:"supplier"`
	Customer Customer `json:"customer"`
	// PaymentTerms is the sentence printed about paying, as at issue.
	PaymentTerms string `json:"payment_terms,omitempty"`
	// TaxRate is the tenant's tax rate at issue (0.2 is 20 %); TaxRule
	// how the tax is computed (TaxPerInvoice or TaxPerLine; "legacy" for
	// invoices issued before the rules, whose tax is the exact amount).
	TaxRate decimal.Decimal `json:"tax_rate"`
	TaxRule string          `json:"tax_rule"`
	// Subtotal is the sum of the lines' exact Amount (the ledger's
	// charges and credits); Tax is Subtotal × TaxRate and Total Subtotal
	// + Tax, exact. They are not what is charged (see Invoice).
	Subtotal decimal.Decimal `json:"subtotal_exact"`
	Tax      decimal.Decimal `json:"tax_exact"`
	Total    decimal.Decimal `json:"total_exact"`
	// SubtotalDisplay is the sum of the lines' rounded amounts: the
	// taxable amount. TaxDisplay is the tax by TaxRule; TotalDisplay
	// their sum, negative on a credit note.
	SubtotalDisplay decimal.Decimal `json:"subtotal"`
	TaxDisplay      decimal.Decimal `json:"tax"`
	TotalDisplay    decimal.Decimal `json:"total"`
	// BalanceApplied is what the tenant's balance from earlier credit
	// notes takes off this invoice (at most TotalDisplay); BalanceCarried
	// is what a credit note adds to that balance (−TotalDisplay).
	BalanceApplied decimal.Decimal `json:"balance_applied"`
	BalanceCarried decimal.Decimal `json:"balance_carried"`
	// AmountDue is TotalDisplay − BalanceApplied; 0 on a credit note.
	AmountDue decimal.Decimal `json:"amount_due"`
	// Jobs counts the charges billed.
	Jobs int64 `json:"jobs"`
	// Lines are the invoice's lines, usage first, then credits and
	// adjustments.
	Lines []InvoiceLine `json:"lines"`
	// Tags sums the usage charges per value tag, for information
	// (internal): a job with several tags counts in each, so they do not
	// add up.
	Tags []TagTotal `json:"tags"`
	// ClosedBy is who closed the period; Note says anything special (a
	// period closed before its end). Both are internal.
	ClosedBy string `json:"closed_by"`
	Note     string `json:"note,omitempty"`
}

// Title is what the document is called: "Invoice" or "Credit note".
func (inv *Invoice) Title() string {
	if inv.Kind == KindCreditNote {
		return "Credit note"
	}
	return "Invoice"
}

// The kinds of invoice line.
const (
	LineUsage      = "usage"
	LineCredit     = "credit"
	LineAdjustment = "adjustment"
)

// The dimensions of a usage line, with their units.
const (
	DimInput          = "input"           // a generation's uncached input tokens
	DimCachedInput    = "cached_input"    // a generation's cached input tokens
	DimEmbeddingInput = "embedding_input" // an embedding job's input tokens
	DimOutput         = "output"          // output tokens
	DimTTFT           = "ttft"            // milliseconds to first token
	DimTool           = "tool"            // milliseconds of tool execution
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
	// ("pb7 acme/tiny v2"). Internal: not on customer documents.
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
	// Amount is the line's exact amount, Quantity × UnitPrice;
	// AmountDisplay the amount charged: Amount rounded half to even at
	// the currency's minor unit (see Invoice).
	Amount        decimal.Decimal `json:"amount_exact"`
	AmountDisplay decimal.Decimal `json:"amount"`
	// CreditID is the credit a credit or adjustment line comes from;
	// AddedBy who added it (internal).
	CreditID int64  `json:"credit_id,omitempty"`
	AddedBy  string `json:"added_by,omitempty"`
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
