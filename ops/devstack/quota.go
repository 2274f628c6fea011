package devstack

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts/quota"
)

// quotas are the stack's two admission checks of tenant limits, one per
// admitter, as in a deployment: the worker's and the gateway's (which
// releases jobs on their results). Each counts what it admits.
type quotas struct {
	worker  *quota.Checker
	gateway *quota.Checker
}

// start makes and starts both checkers on nc.
func (q *quotas) start(ctx context.Context, nc *nats.Conn, log *slog.Logger) error {
	var err error
	if q.worker, err = quota.New(nc, quota.Config{Domain: "worker", Logger: log}); err != nil {
		return err
	}
	if q.gateway, err = quota.New(nc, quota.Config{Domain: "gateway", ReleaseOnResults: true, Logger: log}); err != nil {
		return err
	}
	return errors.Join(q.worker.Start(ctx), q.gateway.Start(ctx))
}

// stop stops both, each once.
func (q *quotas) stop(ctx context.Context) error {
	var errs []error
	for _, c := range []**quota.Checker{&q.worker, &q.gateway} {
		if *c != nil {
			errs = append(errs, (*c).Stop(ctx))
			*c = nil
		}
	}
	return errors.Join(errs...)
}

// Quotas returns the worker's and the gateway's admission checks of
// tenant limits, in that order (for their Prometheus metrics).
func (st *Stack) Quotas() []*quota.Checker {
	return []*quota.Checker{st.quotas.worker, st.quotas.gateway}
}
