package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
)

// Prefix affinity (contracts/affinity.go). A worker that completes a
// generation records in ZL_PREFIXES the prefix it now holds: the
// conversation with its reply (what the next turn starts with). A worker
// that pulls a job whose prompt starts with a prefix another live worker
// holds, and that it does not hold itself,
// passes the job on to that worker's queue (a republish on
// zl.jobs.direct.<holder>…, then an ack) instead of recomputing the
// prefix. Every worker pulls from its own queue before the class
// consumers, while it has room. The queue is not a pin: a worker takes
// jobs from another's queue where one has waited longer than
// Config.AffinityWait (that worker is full) or the worker is gone, so a
// passed-on job waits at most about AffinityWait plus an idle poll.
//
// A batch's shared instruction is not routed (contracts.ConversationKey): each
// worker computes it once and holds it.

// affinity is the worker's prefix-affinity state.
type affinity struct {
	on    bool // passes jobs on and records what it holds
	me    string
	watch *fleet.Watch
	// own are this worker's queues, by model token (intake loop only
	// after Start).
	own map[string]jetstream.Consumer

	mu sync.Mutex
	// queued are the worker queues with jobs noticed and not yet found
	// empty: when the earliest was noticed. The intake loop reads and
	// clears them.
	queued map[queueKey]time.Time
	// queues are the other workers' queues the intake has bound, and
	// scanned when it last listed them (intake loop only).
	queues  map[queueKey]jetstream.Consumer
	scanned time.Time
}

// queueKey names a worker's queue of one model's jobs (tokens).
type queueKey struct{ worker, model string }

// holderLookup bounds the look-up of a conversation's holder that the
// fleet watch does not know yet (fleet.Watch.HolderNow).
const holderLookup = time.Second

// queueScanEvery is how often the intake lists the worker queues for jobs
// no notice announced (scanQueues).
const queueScanEvery = 5 * time.Second

// startAffinity binds this worker's queue and, unless affinity is off,
// the held-prefixes bucket and its watch. A failure turns affinity off
// (logged): the worker serves its classes as before.
func (w *Worker) startAffinity(ctx context.Context) {
	a := &w.aff
	a.me = contracts.ModelToken(w.cfg.ID)
	a.queued, a.queues = map[queueKey]time.Time{}, map[queueKey]jetstream.Consumer{}
	own := map[string]jetstream.Consumer{}
	for _, m := range w.cfg.Models {
		c, err := w.js.CreateOrUpdateConsumer(ctx, contracts.StreamJobs, w.cfg.Streams.DirectConsumerConfig(w.cfg.ID, m))
		if err != nil {
			// A ZL_JOBS provisioned by an earlier release binds no worker
			// queues: serve without affinity until it is provisioned again.
			w.log.Warn("prefix affinity off: this worker's queue", "consumer", contracts.DirectConsumerName(w.cfg.ID, m), "err", err)
			return
		}
		own[contracts.ModelToken(m)] = c
		a.queued[queueKey{a.me, contracts.ModelToken(m)}] = time.Time{} // a queue left from an earlier run is emptied first
	}
	a.own = own
	if w.cfg.AffinityWait < 0 {
		return
	}
	if _, err := w.fleetBucket(ctx, w.cfg.Streams.PrefixesBucketConfig()); err != nil {
		w.log.Warn("prefix affinity off: the held-prefixes bucket", "err", err)
		return
	}
	a.watch = fleet.New(w.js).WithPrefixes()
	if err := a.watch.Start(ctx); err != nil {
		w.log.Warn("prefix affinity off: watching the fleet", "err", err)
		a.watch = nil
		return
	}
	a.on = true
}

func (w *Worker) stopAffinity() {
	a := &w.aff
	if a.watch != nil {
		a.watch.Stop()
	}
}

// noticeDirect records a stored-job notice of a job passed on to a
// worker's queue (the notice callback).
func (a *affinity) noticeDirect(k queueKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queued == nil {
		return
	}
	if _, ok := a.queued[k]; !ok {
		a.queued[k] = time.Now()
	}
}

// holder returns the token of the live worker holding the conversation
// req continues (ZL_PREFIXES, as the fleet watch follows it, or looked up
// where the watch does not have it yet: fleet.Watch.HolderNow), or "" when
// this worker holds it, none does, the worker is alone, or affinity is
// off. A worker whose queue has had a job waiting longer than the bound
// is full: not a holder.
func (w *Worker) holder(req *contracts.JobRequest) string {
	a := &w.aff
	if !a.on || a.watch.LiveCount() < 2 {
		return ""
	}
	k := contracts.ConversationKey(req)
	if k == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), holderLookup)
	defer cancel()
	h := a.watch.HolderNow(ctx, k)
	if h == "" || h == a.me {
		return ""
	}
	a.mu.Lock()
	since, busy := a.queued[queueKey{h, contracts.ModelToken(req.Model)}]
	a.mu.Unlock()
	if busy && time.Since(since) > w.cfg.AffinityWait {
		return ""
	}
	return h
}

// passOn republishes job msg on holder's queue and acks it here; false
// (the job runs here) when the republish fails.
func (w *Worker) passOn(msg jetstream.Msg, route contracts.JobRoute, jobID, holder string, enqueued time.Time, log *slog.Logger) bool {
	m := republished(msg, contracts.DirectJobSubject(holder, route.Priority, route.Bucket, route.Tenant, w.byToken[route.Model], jobID))
	m.Header.Set(contracts.HeaderEnqueuedAt, enqueued.UTC().Format(time.RFC3339Nano))
	// A second pass (the ack below lost, the job redelivered) is the
	// same message to the stream's duplicate check.
	m.Header.Set(contracts.HeaderMsgID, "direct/"+route.Tenant+"/"+jobID)
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	if _, err := w.js.PublishMsg(ctx, m); err != nil && !contracts.IsDuplicateJob(err) {
		log.Warn("passing a job on to the worker holding its prefix failed; it runs here", "holder", holder, "err", err)
		return false
	}
	if err := msg.DoubleAck(ctx); err != nil {
		log.Warn("acking a job passed on to the worker holding its prefix", "holder", holder, "err", err)
	}
	w.cfg.Metrics.affine("passed_on", 1)
	log.Debug("job passed on to the worker holding its prefix", "holder", holder)
	return true
}

// claim returns the key of the conversation this worker holds once it has
// answered req with reply (a completed generation); finish publishes it to
// ZL_PREFIXES before the result, so that a next turn submitted on the
// result finds its holder. "" while affinity is off or the worker is
// alone (no job would be passed on to it).
func (w *Worker) claim(req *contracts.JobRequest, reply string) string {
	a := &w.aff
	if !a.on || a.watch.LiveCount() < 2 {
		return ""
	}
	return contracts.HeldConversationKey(req, reply)
}

// pullDirect returns a job from this worker's queues, or from another's
// (of a model it serves) whose jobs have waited longer than
// Config.AffinityWait or whose worker is gone, fetching up to roomFor() jobs
// (asked only when some queue is due; the rest go to w.ready); nil when
// there is none or no room.
func (w *Worker) pullDirect(roomFor func() int) jetstream.Msg {
	a := &w.aff
	if a.own == nil {
		return nil
	}
	w.scanQueues()
	a.mu.Lock()
	var due []queueKey
	for k, since := range a.queued {
		switch {
		case k.worker == a.me:
			due = append([]queueKey{k}, due...) // its own first
		case time.Since(since) > w.cfg.AffinityWait || a.watch == nil || !a.watch.LiveToken(k.worker):
			due = append(due, k)
		}
	}
	a.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	room := roomFor()
	if room <= 0 {
		return nil
	}
	for _, k := range due {
		cons := a.consumer(w, k)
		var ms []jetstream.Msg
		if cons != nil {
			if batch, err := cons.FetchNoWait(room); err == nil {
				for m := range batch.Messages() {
					w.leases.hold(m)
					ms = append(ms, m)
				}
			}
		}
		if len(ms) == 0 {
			a.mu.Lock()
			delete(a.queued, k)
			a.mu.Unlock()
			continue
		}
		w.cfg.Metrics.fetch(len(ms))
		action := "taken"
		if k.worker != a.me {
			action = "stolen"
		}
		w.cfg.Metrics.affine(action, len(ms))
		for _, m := range ms {
			if route, err := contracts.ParseJobSubject(m.Subject()); err == nil {
				w.charge(route.Tenant, m)
			}
		}
		w.ready = append(w.ready, ms[1:]...)
		return ms[0]
	}
	return nil
}

// consumer returns the queue of k: this worker's own, or another's bound
// by name; nil for a model this worker does not serve or a queue gone.
func (a *affinity) consumer(w *Worker, k queueKey) jetstream.Consumer {
	if _, serves := w.byToken[k.model]; !serves {
		return nil
	}
	if k.worker == a.me {
		return a.own[k.model]
	}
	if c, ok := a.queues[k]; ok {
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ConsumerRecheck)
	defer cancel()
	c, err := w.js.Consumer(ctx, contracts.StreamJobs, contracts.DirectConsumerPrefix+k.worker+"~"+k.model)
	if err != nil {
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			w.log.Debug("binding another worker's queue", "worker", k.worker, "model", k.model, "err", err)
		}
		return nil
	}
	a.queues[k] = c
	return c
}

// scanQueues marks, every queueScanEvery, the queues that hold jobs (or
// jobs delivered and not acked, as a dead worker's are) without a notice
// seen: left by a worker gone before this one started, or redelivered (a
// redelivery publishes none).
func (w *Worker) scanQueues() {
	a := &w.aff
	if a.own == nil || time.Since(a.scanned) < queueScanEvery {
		return
	}
	a.scanned = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ConsumerRecheck)
	defer cancel()
	s, err := w.js.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		return
	}
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		rest, ok := strings.CutPrefix(ci.Name, contracts.DirectConsumerPrefix)
		worker, model, ok2 := strings.Cut(rest, "~")
		if !ok || !ok2 || ci.NumPending+uint64(ci.NumAckPending) == 0 {
			continue
		}
		if _, serves := w.byToken[model]; !serves {
			continue
		}
		if ci.NumPending == 0 && worker != a.me && a.watch != nil && a.watch.LiveToken(worker) {
			continue // delivered to its live worker, which runs them
		}
		a.noticeDirect(queueKey{worker, model})
	}
}
