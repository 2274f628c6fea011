package billing

import (
	"cmp"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// PriceBook is one version of a price list. A book applies to one tenant
// or, with Tenant empty, to every tenant without a book of its own (a
// default book); to one model or, with Model empty, to every model. Within
// one (Tenant, Model) scope versions count up from 1, and each takes effect
// at EffectiveAt: usage created from then on is priced by it, until a later
// version takes over.
type PriceBook struct {
	// ID is the book's row id; 0 for a book that is not stored.
	ID int64 `json:"id"`
	// Tenant is the tenant the book is for; empty for a default book.
	Tenant string `json:"tenant,omitempty"`
	// Model is the model the book is for; empty for any model.
	Model string `json:"model,omitempty"`
	// Version is the book's version within its scope, from 1.
	Version int `json:"version"`
	// EffectiveAt is when the book starts to apply, compared with the
	// usage record's CreatedAt (submission time).
	EffectiveAt time.Time `json:"effective_at"`
	// Currency is the ISO 4217 code of the prices (e.g. "USD").
	Currency string `json:"currency"`
	// PIn is the price of one input token.
	PIn decimal.Decimal `json:"p_in"`
	// POut is the price of one output token.
	POut decimal.Decimal `json:"p_out"`
	// PTTFT is the price of one millisecond of time to first token.
	PTTFT decimal.Decimal `json:"p_ttft"`
	// PTool is the price of one millisecond of inline tool execution.
	PTool decimal.Decimal `json:"p_tool"`
	// PCachedIn is the price of one cached input token (served from the
	// prefix cache); nil means PIn (books stored before it existed).
	PCachedIn *decimal.Decimal `json:"p_cached_in,omitempty"`
	// MultHigh, MultNormal and MultLow scale every dimension of the cost
	// of a job of that priority, and MultBatch that of a job of a batch
	// (metadata batch_id; it stacks with the priority's). Zero means 1:
	// no change.
	MultHigh   decimal.Decimal `json:"mult_high"`
	MultNormal decimal.Decimal `json:"mult_normal"`
	MultLow    decimal.Decimal `json:"mult_low"`
	MultBatch  decimal.Decimal `json:"mult_batch"`
	// EffectiveTo, when set, ends the book: from then on its scope has no
	// price of its own, and a less specific scope's book applies (see
	// EffectivePriceBook).
	EffectiveTo *time.Time `json:"effective_to,omitempty"`
	// Note is free text for people (why the version exists).
	Note string `json:"note,omitempty"`
}

// Name names the book uniquely in reports and on invoices: "pb7" is the
// book of id 7, whatever its scope and version.
func (pb PriceBook) Name() string { return fmt.Sprintf("pb%d", pb.ID) }

// Scope describes the book's scope and version, as "acme/tiny v2" or
// "default/any model v1".
func (pb PriceBook) Scope() string {
	t, m := cmp.Or(pb.Tenant, "default"), cmp.Or(pb.Model, "any model")
	return fmt.Sprintf("%s/%s v%d", t, m, pb.Version)
}

// CachedInputPrice is the price of one cached input token: PCachedIn, or
// PIn when the book has none.
func (pb PriceBook) CachedInputPrice() decimal.Decimal {
	if pb.PCachedIn != nil {
		return *pb.PCachedIn
	}
	return pb.PIn
}

// one is the multiplier that changes nothing.
var one = decimal.NewFromInt(1)

// orOne is m, or 1 when m is zero (a multiplier not set).
func orOne(m decimal.Decimal) decimal.Decimal {
	if m.IsZero() {
		return one
	}
	return m
}

// Multiplier is the factor the book applies to every dimension of the
// cost of a job of priority p, of a batch or not.
func (pb PriceBook) Multiplier(p contracts.Priority, batch bool) decimal.Decimal {
	m := orOne(pb.MultNormal)
	switch p {
	case contracts.PriorityHigh:
		m = orOne(pb.MultHigh)
	case contracts.PriorityLow:
		m = orOne(pb.MultLow)
	}
	if batch {
		m = m.Mul(orOne(pb.MultBatch))
	}
	return m
}

// DefaultPriceBook returns DESIGN.md's default prices, in USD: 0.000003
// per input token, 0.000015 per output token, 0.0000002 per millisecond to
// first token and 0.0000001 per millisecond of tool execution. It is
// version 1 of the default book the migrations seed, effective since the
// Unix epoch; its ID is 0 because it is not read from the database.
func DefaultPriceBook() PriceBook {
	return PriceBook{
		Version:     1,
		EffectiveAt: time.Unix(0, 0).UTC(),
		Currency:    "USD",
		PIn:         decimal.RequireFromString("0.000003"),
		POut:        decimal.RequireFromString("0.000015"),
		PTTFT:       decimal.RequireFromString("0.0000002"),
		PTool:       decimal.RequireFromString("0.0000001"),
		MultHigh:    one,
		MultNormal:  one,
		MultLow:     one,
		MultBatch:   one,
		Note:        "DESIGN.md defaults",
	}
}

// Breakdown is a job's cost per dimension, unrounded, in the price book's
// currency, each dimension scaled by the book's multiplier for the job.
// Total is the sum of the five others.
type Breakdown struct {
	// Input is the uncached input tokens (input_tokens −
	// cached_input_tokens) × p_in. Charges made before cached input had a
	// price of its own carry every input token here.
	Input decimal.Decimal `json:"input"`
	// CachedInput is cached_input_tokens × p_cached_in.
	CachedInput decimal.Decimal `json:"cached_input"`
	// Output is output_tokens × p_out.
	Output decimal.Decimal `json:"output"`
	// TTFT is time_to_first_token_ms × p_ttft.
	TTFT decimal.Decimal `json:"ttft"`
	// Tool is tool_execution_time_ms × p_tool.
	Tool decimal.Decimal `json:"tool"`
	// Total is Input + CachedInput + Output + TTFT + Tool.
	Total decimal.Decimal `json:"total"`
}

// Add returns the dimension-wise sum of b and o.
func (b Breakdown) Add(o Breakdown) Breakdown {
	return Breakdown{
		Input:       b.Input.Add(o.Input),
		CachedInput: b.CachedInput.Add(o.CachedInput),
		Output:      b.Output.Add(o.Output),
		TTFT:        b.TTFT.Add(o.TTFT),
		Tool:        b.Tool.Add(o.Tool),
		Total:       b.Total.Add(o.Total),
	}
}

// Equal reports whether every dimension of b equals o's, as numbers
// (0.10 equals 0.1).
func (b Breakdown) Equal(o Breakdown) bool {
	return b.Input.Equal(o.Input) && b.CachedInput.Equal(o.CachedInput) && b.Output.Equal(o.Output) && b.TTFT.Equal(o.TTFT) &&
		b.Tool.Equal(o.Tool) && b.Total.Equal(o.Total)
}

// Cost prices u with pb:
//
//	cost = m × ( (input_tokens − cached_input_tokens) × p_in
//	           + cached_input_tokens × p_cached_in
//	           + output_tokens × p_out
//	           + time_to_first_token_ms × p_ttft
//	           + tool_execution_time_ms × p_tool )
//
// where m is the book's multiplier for the job's priority, times its batch
// multiplier for a job of a batch (PriceBook.Multiplier), applied to each
// dimension,
// in exact decimal arithmetic, unrounded (round only on invoices, with
// RoundInvoice). The millisecond timings arrive as JSON numbers decoded
// into float64; each is converted with FloatDecimal, which yields the
// shortest decimal that reads back as the same float64. For any timing a
// Go encoder wrote, that is exactly the digits of the JSON text (31.25
// stays 31.25, 0.1 stays 0.1, never 0.1000000000000000055…), so the price
// of a record is the price of what was on the wire.
//
// Cost panics if a timing is NaN or infinite, which no JSON record can
// carry; contracts.DecodeUsage and Usage.Validate reject such records.
func Cost(u contracts.Usage, pb PriceBook) Breakdown {
	m := pb.Multiplier(u.Priority, u.BatchID != "")
	cached := min(u.CachedInputTokens, u.InputTokens)
	b := Breakdown{
		Input:       decimal.NewFromInt(int64(u.InputTokens - cached)).Mul(pb.PIn).Mul(m),
		CachedInput: decimal.NewFromInt(int64(cached)).Mul(pb.CachedInputPrice()).Mul(m),
		Output:      decimal.NewFromInt(int64(u.OutputTokens)).Mul(pb.POut).Mul(m),
		TTFT:        FloatDecimal(u.TimeToFirstTokenMs).Mul(pb.PTTFT).Mul(m),
		Tool:        FloatDecimal(u.ToolExecutionTimeMs).Mul(pb.PTool).Mul(m),
	}
	b.Total = b.Input.Add(b.CachedInput).Add(b.Output).Add(b.TTFT).Add(b.Tool)
	return b
}

// FloatDecimal converts a measured float64 (milliseconds, MiB, a
// probability) to a decimal: the shortest decimal that parses back to the
// same float64, which is the text encoding/json writes for it (see Cost).
// It panics on NaN and infinities.
func FloatDecimal(f float64) decimal.Decimal { return decimal.NewFromFloat(f) }

// RoundInvoice rounds an amount for an invoice line: half to even (banker's
// rounding) at currency's minor unit, so 0.125 USD is 0.12 and 0.135 USD is
// 0.14. Charges and reports keep unrounded amounts; round only what is
// billed, and round the sum rather than summing rounded lines.
func RoundInvoice(d decimal.Decimal, currency string) decimal.Decimal {
	return d.RoundBank(MinorUnits(currency))
}
