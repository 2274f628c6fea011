// Package price is what the ledger and finance agree a job costs: a
// price book version (Book), the cost formula (Cost) and its result per
// dimension (Breakdown), and the currencies money is counted in, with
// their rounding (RoundInvoice, DisplayAmounts). The cost of a generation
// is
//
//	m × ( (input_tokens − cached_input_tokens) × p_in
//	      + cached_input_tokens × p_cached_in + output_tokens × p_out
//	      + time_to_first_token_ms × p_ttft + tool_execution_time_ms × p_tool )
//
// and that of an embedding job (usage kind "embedding") the same with
// every input token at the embedding rate, input_tokens × p_embed_in, in
// a dimension of its own (Breakdown.EmbeddingInput), in place of the two
// input terms. A book without p_cached_in or p_embed_in prices those
// tokens at p_in. m is the book's multiplier for the job's priority (times
// its batch multiplier for a job of a batch; see Cost), in
// shopspring/decimal, never floating point, and unrounded until an invoice
// (RoundInvoice: half to even at the currency's minor unit).
//
// Books are stored and looked up elsewhere: the ledger reads the one in
// force (ledger.EffectivePriceBook) and finance adds and ends versions
// (finance.CreatePriceBook). This package only says what a book is and
// what it prices.
//
// Example: price a record without a database.
//
//	u, err := contracts.DecodeUsage(body)
//	if err != nil {
//		return err
//	}
//	b := price.Cost(u, price.DefaultBook())
//	fmt.Println(b.Total, price.RoundInvoice(b.Total, "USD"))
//
// It imports contracts and nothing else of ours, so that both rooms can
// import it.
package price
