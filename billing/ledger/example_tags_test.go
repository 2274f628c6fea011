package ledger_test

import (
	"fmt"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/contracts"
)

// Tag a job with the default value-tag rules.
func ExampleTags() {
	u := contracts.Usage{OutputTokens: 350, Confidence: 0.97, TimeToFirstTokenMs: 72.5, ToolExecutionTimeMs: 0.4}
	fmt.Println(ledger.Tags(u, ledger.DefaultTagRules()))
	// Output:
	// [effective_service high_latency_risk]
}
