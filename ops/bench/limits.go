package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing/ledger"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
)

// setHighLimits gives Tenant every limit, each too high to refuse a job,
// waits until billing has published them to both of the stack's admitters,
// and returns the gateway's admitter for the benchmark's producer.
func setHighLimits(ctx context.Context, st *devstack.Stack) (producer.Admitter, error) {
	n := func(v int64) *int64 { return &v }
	spend := decimal.NewFromInt(1_000_000_000)
	if _, err := ledger.SetTenantLimits(ctx, st.Pool(), ledger.TenantLimits{Tenant: Tenant,
		RequestsPerMinute: n(1 << 40), TokensPerMinute: n(1 << 50), MaxConcurrent: n(1 << 40), MonthlySpend: &spend}); err != nil {
		return nil, err
	}
	qs := st.Quotas()
	deadline := time.Now().Add(time.Minute)
	for !qs[0].Limited(Tenant) || !qs[1].Limited(Tenant) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: the limits of %s did not reach the admitters within a minute (is billing publishing?)", Tenant)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return qs[1], nil
}
