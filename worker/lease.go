package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Leases. JetStream redelivers a job that its worker neither acks nor
// keeps alive with InProgress within the consumer's ack wait
// (contracts.DefaultAckWait, 4 s): that is how a dead worker's jobs reach
// another worker, within seconds. A live worker therefore keeps alive every
// job message it holds, from the pull that brought it to its ack, nak or
// term, wherever it is: fetched and not yet given a slot (Worker.ready, or
// the answer to a pull waiting for the intake loop), looking up its cancel
// request and quota, waiting in the scheduler for admission or memory,
// running, or publishing its results and waiting for their acks. One
// goroutine does it for all of them every Config.InProgressInterval (1 s),
// whatever the job's state, so a slow job on a live worker is never
// redelivered; it then flushes the connection, since InProgress is a
// publish the server does not answer: the PONG that follows says the server
// has read the heartbeats before it.
//
// A heartbeat late by more than the ack wait (the process stalled, or NATS
// was out of reach) may have let JetStream hand a job to another worker
// while this one goes on with it. The job then runs twice; its result and
// usage record are stored once (Nats-Msg-Id <tenant>/<job_id>), so it is
// billed once, and a redelivery that finds the result stored does not run
// (handle). The worker logs such a lapse and counts it
// (zerolayer_worker_lease_lapses_total), and lets its jobs go on: JetStream
// does not say whether another worker took them, and one that none took is
// answered sooner by this worker than by a new attempt.
//
// Lock order: leases.mu is taken alone, never with Worker.mu.
type leases struct {
	mu   sync.Mutex
	held map[jetstream.Msg]struct{}
	// ackWait is the shortest ack wait of the worker's configuration and
	// of the consumers it has bound (one provisioned by another process
	// may have a shorter one than this worker's configuration).
	ackWait atomic.Int64
}

// hold starts keeping m alive.
func (l *leases) hold(m jetstream.Msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[jetstream.Msg]struct{}{}
	}
	l.held[m] = struct{}{}
}

// release stops keeping m alive: it has been acked, naked or termed (or
// the worker gave up on it).
func (l *leases) release(m jetstream.Msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, m)
}

// list returns the messages held now.
func (l *leases) list() []jetstream.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]jetstream.Msg, 0, len(l.held))
	for m := range l.held {
		out = append(out, m)
	}
	return out
}

// bound records the ack wait of a consumer the worker pulls from.
func (l *leases) bound(ackWait time.Duration) {
	for {
		cur := l.ackWait.Load()
		if ackWait <= 0 || cur != 0 && int64(ackWait) >= cur {
			return
		}
		if l.ackWait.CompareAndSwap(cur, int64(ackWait)) {
			return
		}
	}
}

// bindConsumer records c's ack wait (from the info of its lookup or
// creation) for the heartbeats.
func (w *Worker) bindConsumer(c jetstream.Consumer) {
	if info := c.CachedInfo(); info != nil {
		w.leases.bound(info.Config.AckWait)
	}
}

// leaseTiming returns how often to send the heartbeats (InProgressInterval,
// or a quarter of a bound consumer's ack wait if that is shorter) and the
// ack wait they must beat.
func (w *Worker) leaseTiming() (every, ackWait time.Duration) {
	ackWait = time.Duration(w.leases.ackWait.Load())
	return max(min(w.cfg.InProgressInterval, ackWait/4), time.Millisecond), ackWait
}

// keepLeases sends InProgress for every held message each interval until
// stop is closed, then closes done.
func (w *Worker) keepLeases(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every, _ := w.leaseTiming()
	t := time.NewTicker(every)
	defer t.Stop()
	// sent is when the last round the server confirmed was sent: a job
	// held across two confirmed rounds had its lease renewed no later
	// than then.
	sent := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		start := time.Now()
		held := w.leases.list()
		if len(held) == 0 {
			sent = start // nothing held, nothing to lapse
			continue
		}
		for _, m := range held {
			m.InProgress() // (fails only for a message acked meanwhile, or a closed connection)
		}
		e, ackWait := w.leaseTiming()
		if err := w.nc.FlushTimeout(ackWait - e); err != nil {
			w.log.Debug("heartbeats not confirmed", "held", len(held), "err", err)
		} else {
			if gap := time.Since(sent); gap > ackWait {
				w.log.Warn("heartbeats were late: held jobs may have been redelivered to another worker and run twice (their results and usage are stored once)",
					"without_heartbeat", gap.Round(time.Millisecond), "ack_wait", ackWait, "held", len(held))
				w.cfg.Metrics.leaseLapse()
			}
			sent = start
		}
		if e != every {
			every = e
			t.Reset(every)
		}
	}
}
