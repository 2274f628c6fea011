package price_test

import (
	"fmt"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// Price one job at DESIGN.md's default prices, then round the amount for
// an invoice.
func ExampleCost() {
	u := contracts.Usage{
		InputTokens:         182,
		OutputTokens:        47,
		TimeToFirstTokenMs:  31.25,
		ToolExecutionTimeMs: 0.875,
	}
	b := price.Cost(u, price.DefaultBook())
	fmt.Println("input: ", b.Input)
	fmt.Println("output:", b.Output)
	fmt.Println("ttft:  ", b.TTFT)
	fmt.Println("tool:  ", b.Tool)
	fmt.Println("total: ", b.Total)
	// A thousand such jobs on one invoice: round the sum, not each job.
	invoice := b.Total.Mul(price.FloatDecimal(1000))
	fmt.Println("1000 jobs:", invoice, "→", price.RoundInvoice(invoice, "USD").StringFixed(2), "USD")
	// Output:
	// input:  0.000546
	// output: 0.000705
	// ttft:   0.00000625
	// tool:   0.0000000875
	// total:  0.0012573375
	// 1000 jobs: 1.2573375 → 1.26 USD
}
