package price

import (
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

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
// multiplier for a job of a batch (Book.Multiplier), applied to each
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
func Cost(u contracts.Usage, pb Book) Breakdown {
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
