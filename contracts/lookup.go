package contracts

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// nats.ErrNoResponders. It waits at most lookupTimeout (or until ctx
// ends, if sooner).
func LastMsg(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	// Each look-up waits at most lookupTimeout, whatever ctx allows: a
	// request or reply lost while the servers restart would otherwise hold
	// the caller (and its retries) until ctx ends.
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
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

// IsUnreachable reports whether err is NATS or JetStream being out of
// reach for now (a connection down or reconnecting, a server restarting,
// a stream without a leader, a request timed out): the call may succeed
// if made again later. A client closed for good is not.
func IsUnreachable(err error) bool {
	for _, e := range []error{nats.ErrNoResponders, nats.ErrTimeout, nats.ErrDisconnected, nats.ErrConnectionReconnecting,
		nats.ErrNoServers, jetstream.ErrNoStreamResponse, jetstream.ErrAsyncPublishTimeout} {
		if errors.Is(err, e) {
			return true
		}
	}
	// A direct get or API call the server answered with 503 (no
	// responders for a stream without a leader, JetStream not ready).
	return err != nil && strings.Contains(err.Error(), ": 503 ")
}

// lookupTimeout bounds one LastMsg.
const lookupTimeout = 5 * time.Second

// jsErrMaxMsgsPerSubject is JetStream's error code for a publish the
// stream could not store (JSStreamStoreFailedF): its description says why,
// "maximum messages per subject exceeded" (DiscardNewPerSubject) or
// "maximum messages exceeded" / "maximum bytes exceeded" (DiscardNew).
const jsErrMaxMsgsPerSubject jetstream.ErrorCode = 10077

// IsDuplicateJob reports whether err is ZL_JOBS refusing a publish because
// a job with the same tenant and id is already queued on that subject: the
// submission is a repeat, and the job will run once. (The server gives the
// same error code to a stream that is full, with another description: that
// is IsQueueFull, and the job was not stored.)
func IsDuplicateJob(err error) bool {
	perSubject, ok := storeFailed(err)
	return ok && perSubject
}

// storeFailed reports whether err is a publish the stream could not store
// (jsErrMaxMsgsPerSubject), and whether for its per-subject limit.
func storeFailed(err error) (perSubject, ok bool) {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrMaxMsgsPerSubject {
		return false, false
	}
	return strings.Contains(apiErr.Description, "per subject"), true
}

// jsErrInsufficientResources is the server's JetStream storage being
// exhausted.
const jsErrInsufficientResources jetstream.ErrorCode = 10023

// IsQueueFull reports whether err is a stream refusing a publish because it
// is at its message or byte limit (with DiscardNew, as ZL_JOBS is), or the
// server is out of JetStream storage: nothing was stored.
func IsQueueFull(err error) bool {
	if perSubject, ok := storeFailed(err); ok {
		return !perSubject
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrInsufficientResources
}
