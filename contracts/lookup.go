package contracts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastMsg returns the last message stored on subject in stream, or nil
// when there is none, through JetStream's direct get
// ($JS.API.DIRECT.GET.<stream>.<subject>; the stream must allow direct
// get, as ZL_EVENTS, ZL_RESULTS and ZL_CANCEL do). It needs no other
// JetStream API, so it works the same in the system account and in a
// tenant's account, which imports that subject for its own tenant only
// (ops/nats/nats.conf). A tenant asking for another tenant's subject gets
// nats.ErrNoResponders. Without a deadline on ctx it waits at most
// lookupTimeout.
func LastMsg(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return nil, err
	}
	switch m.Header.Get("Status") {
	case "":
		return m, nil
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("contracts: direct get %s from %s: %s %s", subject, stream, m.Header.Get("Status"), m.Header.Get("Description"))
	}
}

// lookupTimeout bounds a LastMsg whose context has no deadline.
const lookupTimeout = 5 * time.Second

// jsErrMaxMsgsPerSubject is JetStream's error code for a publish refused
// because its subject already holds the most messages allowed
// (DiscardNewPerSubject).
const jsErrMaxMsgsPerSubject jetstream.ErrorCode = 10077

// IsDuplicateJob reports whether err is ZL_JOBS refusing a publish because
// a job with the same tenant and id is already queued on that subject: the
// submission is a repeat, and the job will run once.
func IsDuplicateJob(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrMaxMsgsPerSubject
}
