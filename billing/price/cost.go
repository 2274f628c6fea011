package price

import (
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/contracts"
)

// Breakdown is a job's cost per dimension, unrounded, in the price book's
// currency, each dimension scaled by the book's multiplier for the job.
// Total is the sum of the six others. A generation's input tokens are in
// Input and CachedInput; an embedding job's (contracts.KindEmbedding) are
// all in EmbeddingInput.
type Breakdown struct {
	// Input is a generation's uncached input tokens (input_tokens −
	// cached_input_tokens) × p_in. Charges made before cached input had a
	// price of its own carry every input token here, and so do those of
	// embedding jobs made before embeddings had one.
	Input decimal.Decimal `json:"input"`
	// CachedInput is a generation's cached_input_tokens × p_cached_in.
	CachedInput decimal.Decimal `json:"cached_input"`
	// EmbeddingInput is an embedding job's input_tokens × p_embed_in;
	// zero for a generation.
	EmbeddingInput decimal.Decimal `json:"embedding_input"`
	// Output is output_tokens × p_out.
	Output decimal.Decimal `json:"output"`
	// TTFT is time_to_first_token_ms × p_ttft.
	TTFT decimal.Decimal `json:"ttft"`
	// Tool is tool_execution_time_ms × p_tool.
	Tool decimal.Decimal `json:"tool"`
	// Total is Input + CachedInput + EmbeddingInput + Output + TTFT + Tool.
	Total decimal.Decimal `json:"total"`
}

// Add returns the dimension-wise sum of b and o.
func (b Breakdown) Add(o Breakdown) Breakdown {
	return Breakdown{
		Input:          b.Input.Add(o.Input),
		CachedInput:    b.CachedInput.Add(o.CachedInput),
		EmbeddingInput: b.EmbeddingInput.Add(o.EmbeddingInput),
		Output:         b.Output.Add(o.Output),
		TTFT:           b.TTFT.Add(o.TTFT),
		Tool:           b.Tool.Add(o.Tool),
		Total:          b.Total.Add(o.Total),
	}
}

// Equal reports whether every dimension of b equals o's, as numbers
// (0.10 equals 0.1).
func (b Breakdown) Equal(o Breakdown) bool {
	return b.Input.Equal(o.Input) && b.CachedInput.Equal(o.CachedInput) && b.EmbeddingInput.Equal(o.EmbeddingInput) &&
		b.Output.Equal(o.Output) && b.TTFT.Equal(o.TTFT) && b.Tool.Equal(o.Tool) && b.Total.Equal(o.Total)
}

// Cost prices u with pb. A generation (u.Kind empty) costs
//
//	cost = m × ( (input_tokens − cached_input_tokens) × p_in
//	           + cached_input_tokens × p_cached_in
//	           + output_tokens × p_out
//	           + time_to_first_token_ms × p_ttft
//	           + tool_execution_time_ms × p_tool )
//
// and an embedding job (contracts.KindEmbedding) the same with its input
// priced at the embedding rate instead, every input token of it (cached
// ones included, should a record count any: an embedding keeps no prefix
// cache to bill at a discount):
//
//	cost = m × ( input_tokens × p_embed_in
//	           + output_tokens × p_out
//	           + time_to_first_token_ms × p_ttft
//	           + tool_execution_time_ms × p_tool )
//
// where the last three terms are zero for a record that keeps the
// contract (an embedding generates nothing). p_cached_in and p_embed_in
// are p_in in a book without them (Book.CachedInputPrice,
// Book.EmbeddingInputPrice). m is the book's multiplier for the job's
// priority, times its batch multiplier for a job of a batch
// (Book.Multiplier), applied to each dimension, in exact decimal
// arithmetic, unrounded (round only on invoices, with RoundInvoice). The millisecond timings arrive as JSON numbers decoded
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
	tokens := func(n int, p decimal.Decimal) decimal.Decimal { return decimal.NewFromInt(int64(n)).Mul(p).Mul(m) }
	b := Breakdown{
		Output: tokens(u.OutputTokens, pb.POut),
		TTFT:   FloatDecimal(u.TimeToFirstTokenMs).Mul(pb.PTTFT).Mul(m),
		Tool:   FloatDecimal(u.ToolExecutionTimeMs).Mul(pb.PTool).Mul(m),
	}
	if u.Kind == contracts.KindEmbedding {
		b.Input, b.CachedInput = decimal.Zero, decimal.Zero
		b.EmbeddingInput = tokens(u.InputTokens, pb.EmbeddingInputPrice())
	} else {
		cached := min(u.CachedInputTokens, u.InputTokens)
		b.Input = tokens(u.InputTokens-cached, pb.PIn)
		b.CachedInput = tokens(cached, pb.CachedInputPrice())
		b.EmbeddingInput = decimal.Zero
	}
	b.Total = b.Input.Add(b.CachedInput).Add(b.EmbeddingInput).Add(b.Output).Add(b.TTFT).Add(b.Tool)
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
