package billing

import (
	"context"
	"time"

	"github.com/zerolayer/zerolayer/billing/finance"
	"github.com/zerolayer/zerolayer/billing/ledger"
)

// Config configures a Service: ledger.Config.
type Config = ledger.Config

// Service is the billing process: ledger.Service.
type Service = ledger.Service

// NewService checks cfg and builds the billing service (ledger.NewService).
func NewService(cfg Config) (*Service, error) { return ledger.NewService(cfg) }

// GetCharge returns the charge of tenant's job jobID (ledger.GetCharge).
func GetCharge(ctx context.Context, db ledger.DB, tenant, jobID string) (ledger.Charge, error) {
	return ledger.GetCharge(ctx, db, tenant, jobID)
}

// BuildReport reads tenant's report of the usage created in [from, to)
// (finance.BuildReport).
func BuildReport(ctx context.Context, db finance.DB, tenant string, from, to time.Time) (*finance.Report, error) {
	return finance.BuildReport(ctx, db, tenant, from, to)
}
