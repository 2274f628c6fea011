package worker

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// Tenant-aware intake. Jobs of the current subject form are pulled through
// one consumer per class, tenant and served model
// (contracts.ModelConsumerConfig: a worker never pulls another model's
// jobs), jobs of the model-less form through one per class and tenant
// (contracts.TenantConsumerConfig), and
// within a class the intake takes the next job from the tenant that has
// been served the fewest tokens for its weight (deficit round robin on
// estimated tokens: prompt + max_tokens), among the tenants with jobs
// waiting in that class. A tenant's burst therefore cannot push another
// tenant's jobs behind it: the other tenant's next job is the next pull.
// Every worker does the same over the same consumers, so shares hold
// across workers too.
//
// Which tenants have jobs waiting comes from the stored-job notices
// (zl.stored.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>, a
// notice for a model this worker does not serve ignored), from a scan of
// the stream's subjects at Start and every tenantScanEvery (jobs queued
// while no worker listened), and from trying every known tenant again at
// each IdlePoll (redeliveries publish no notice).

// tenantScanEvery is how often the intake rereads which tenants have jobs
// queued, in case it missed their notices.
const tenantScanEvery = 30 * time.Second

// noticeGrace is how long after a notice an empty fetch does not clear a
// tenant's pending flag: a consumer counts a new message a moment after the
// stream has announced it. It is also how long the server holds the pull
// the intake then sends (pullNoticed).
const noticeGrace = 50 * time.Millisecond

// sourceKey names a tenantSource of a class: a tenant and a served model,
// or "" for the tenant's jobs of the model-less form.
type sourceKey struct {
	tenant string
	model  string
}

// tenantSource is the consumer of one class, tenant and model (or of the
// class and tenant's model-less jobs).
type tenantSource struct {
	tenant string
	// model is the served name of the model whose jobs the consumer
	// holds; "" for the model-less form's consumer.
	model   string
	cons    jetstream.Consumer // nil until created
	pending bool
	noticed time.Time
	// waiting is set while a pull for a noticed job waits on the server
	// (pullNoticed); its answer comes through Worker.arrived.
	waiting bool
}

// arrival is the answer to a pull that waited on the server: the job, or
// nil when the pull expired empty (another worker took the job).
type arrival struct {
	ts *tenantSource
	m  jetstream.Msg
}

// fairness is the intake's per-tenant state. The notice callback records
// into noticed under mu; everything else belongs to the intake loop.
type fairness struct {
	mu      sync.Mutex
	noticed map[classKey]map[sourceKey]time.Time // the model as its token

	served    map[string]float64 // estimated tokens served / weight
	lastScan  time.Time
	lastRetry time.Time
}

type classKey struct {
	prio   contracts.Priority
	bucket contracts.Bucket
}

// notice records a stored-job notice (called from the subscription): a
// job of a class and tenant, or one passed on to a worker's queue.
func (w *Worker) notice(subject string) {
	route, err := contracts.ParseJobSubject("zl." + strings.TrimPrefix(subject, "zl.stored."))
	if err != nil || route.JobID == "" {
		return
	}
	if route.Direct != "" {
		w.aff.noticeDirect(queueKey{route.Direct, route.Model})
		return
	}
	w.fair.notice(route)
}

// notice records a stored job of route's class, tenant and model.
func (f *fairness) notice(route contracts.JobRoute) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := classKey{route.Priority, route.Bucket}
	if f.noticed == nil {
		f.noticed = map[classKey]map[sourceKey]time.Time{}
	}
	if f.noticed[k] == nil {
		f.noticed[k] = map[sourceKey]time.Time{}
	}
	f.noticed[k][sourceKey{route.Tenant, route.Model}] = time.Now()
}

// absorb moves the recorded notices into the sources.
func (w *Worker) absorb() {
	w.fair.mu.Lock()
	noticed := w.fair.noticed
	w.fair.noticed = nil
	w.fair.mu.Unlock()
	for k, tenants := range noticed {
		src := w.source(k)
		if src == nil {
			continue // a class this worker does not serve
		}
		for sk, at := range tenants {
			if sk.model != "" {
				name, ok := w.byToken[sk.model]
				if !ok {
					continue // another model's job
				}
				sk.model = name
			}
			ts := w.tenantSource(src, sk)
			ts.pending, ts.noticed = true, at
		}
	}
}

func (w *Worker) source(k classKey) *pullSource {
	for _, src := range w.consumers {
		if src.prio == k.prio && src.bucket == k.bucket {
			return src
		}
	}
	return nil
}

// tenantSource returns src's source for sk (a tenant and a served model,
// or "" for its model-less jobs), making it (and lifting a tenant back
// from idle to the least-served active tenant, so idle time is not banked
// as credit).
func (w *Worker) tenantSource(src *pullSource, sk sourceKey) *tenantSource {
	if ts := src.tenants[sk]; ts != nil {
		if !w.activeTenant(sk.tenant) {
			w.liftFromIdle(sk.tenant)
		}
		return ts
	}
	if src.tenants == nil {
		src.tenants = map[sourceKey]*tenantSource{}
	}
	w.liftFromIdle(sk.tenant)
	ts := &tenantSource{tenant: sk.tenant, model: sk.model}
	src.tenants[sk] = ts
	return ts
}

func (w *Worker) activeTenant(t string) bool {
	for _, src := range w.consumers {
		for _, ts := range src.tenants {
			if ts.tenant == t && ts.pending {
				return true
			}
		}
	}
	return false
}

func (w *Worker) liftFromIdle(t string) {
	low, any := math.Inf(1), false
	for _, src := range w.consumers {
		for _, ts := range src.tenants {
			if ts.pending && ts.tenant != t {
				low, any = math.Min(low, w.fair.served[ts.tenant]), true
			}
		}
	}
	if any && w.fair.served[t] < low {
		w.fair.served[t] = low
	}
}

// scanTenants reads from ZL_JOBS which tenants have jobs queued in which
// class for which of the served models (and in the model-less form, and
// whether jobs of the oldest form are), when tenantScanEvery has passed
// since the last scan.
func (w *Worker) scanTenants(force bool) {
	if !force && time.Since(w.fair.lastScan) < tenantScanEvery {
		return
	}
	w.fair.lastScan = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ConsumerRecheck)
	defer cancel()
	s, err := w.js.Stream(ctx, contracts.StreamJobs)
	if err != nil {
		w.log.Warn("reading which tenants have jobs queued", "err", err)
		return
	}
	for _, filter := range []string{contracts.SubjectJobsAll, contracts.ModellessJobsAll, contracts.LegacyJobsAll} {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			w.log.Warn("reading which tenants have jobs queued", "err", err)
			return
		}
		for subject := range info.State.Subjects {
			route, err := contracts.ParseJobSubject(subject)
			if err != nil {
				continue
			}
			src := w.source(classKey{route.Priority, route.Bucket})
			switch {
			case src == nil:
			case route.JobID == "":
				src.legacy = true
			case route.Model == "":
				w.tenantSource(src, sourceKey{tenant: route.Tenant}).pending = true
			default:
				if name, ok := w.byToken[route.Model]; ok {
					w.tenantSource(src, sourceKey{route.Tenant, name}).pending = true
				}
			}
		}
	}
}

// retryAll marks every known tenant source pending again: at each
// IdlePoll, busy or not (redelivered jobs publish no notice, and a fetch
// can come back empty while a consumer is still counting its messages, so
// a tenant found empty once is looked at again soon, never left until
// other tenants' backlogs drain).
func (w *Worker) retryAll() {
	w.fair.lastRetry = time.Now()
	for m := range w.aff.own {
		w.aff.noticeDirect(queueKey{w.aff.me, m}) // its queues' redeliveries
	}
	for _, src := range w.consumers {
		for _, ts := range src.tenants {
			ts.pending = true
		}
	}
}

// pullFair fetches the next jobs of src's class from the least-served
// tenant with jobs waiting, its share of the room (room allows for it, for
// the source's model, split evenly among the sources with jobs waiting, so
// that one tenant's batch does not take the room of the others'), and
// returns the first (the rest go to w.ready), or nil. Sources without room
// are left for a worker with room (and for this one, later).
func (w *Worker) pullFair(src *pullSource, room func(ts *tenantSource) int) jetstream.Msg {
	var skip map[*tenantSource]bool // sources passed over this time; made on the first
	pass := func(ts *tenantSource) {
		if skip == nil {
			skip = map[*tenantSource]bool{}
		}
		skip[ts] = true
	}
	for {
		var best *tenantSource
		waiting := 0 // sources with jobs waiting: they share the room
		for _, ts := range src.tenants {
			if !ts.pending || ts.waiting || skip[ts] {
				continue
			}
			waiting++
			if best == nil || w.fair.served[ts.tenant] < w.fair.served[best.tenant] ||
				w.fair.served[ts.tenant] == w.fair.served[best.tenant] && (ts.tenant < best.tenant || ts.tenant == best.tenant && ts.model < best.model) {
				best = ts
			}
		}
		if best == nil {
			return nil
		}
		n := room(best)
		if n == 0 {
			pass(best)
			continue
		}
		n = max(1, n/waiting)
		if ms := w.fetchTenant(src, best, n); len(ms) > 0 {
			for _, m := range ms {
				w.charge(best.tenant, m)
			}
			w.ready = append(w.ready, ms[1:]...)
			return ms[0]
		}
		if time.Since(best.noticed) > noticeGrace {
			best.pending = false
		} else {
			// The notice is fresh: the consumer has not counted the job
			// yet. Ask the server to hand it over when it has.
			w.pullNoticed(best)
			pass(best)
		}
	}
}

// charge counts job m against tenant, for fairness.
func (w *Worker) charge(tenant string, m jetstream.Msg) {
	w.fair.served[tenant] += float64(estimateTokens(m.Data(), w.cfg.Limits)) / w.cfg.weight(tenant)
}

// pullNoticed sends ts's consumer a pull that waits on the server for up
// to noticeGrace: a job whose notice came before its consumer counted it
// is handed over the moment the consumer has, instead of at a later poll
// (a sleep on this side would either spin or add its length to the job's
// queue time). The answer comes through w.arrived; the intake loop takes
// it like a fetched job. A job that arrives once the worker is stopping
// is handed back at once.
func (w *Worker) pullNoticed(ts *tenantSource) {
	if ts.cons == nil {
		return
	}
	batch, err := ts.cons.Fetch(1, jetstream.FetchMaxWait(noticeGrace))
	if err != nil {
		w.log.Debug("pull for a noticed job failed", "tenant", ts.tenant, "err", err)
		return
	}
	ts.waiting = true
	w.pulls.Add(1)
	go func() {
		defer w.pulls.Done()
		a, n := arrival{ts: ts}, 0
		for m := range batch.Messages() {
			// Kept alive while it waits for the intake loop, which
			// takes answers only when a slot is free.
			w.leases.hold(m)
			a.m, n = m, n+1
		}
		w.cfg.Metrics.fetch(n)
		select {
		case w.arrived <- a:
		case <-w.quit:
			if a.m != nil {
				a.m.Nak()
				w.leases.release(a.m)
			}
		}
	}()
}

// take accepts an answered pull (pullNoticed): ts may be pulled again,
// and a job it brought is charged to its tenant.
func (w *Worker) take(a arrival) jetstream.Msg {
	a.ts.waiting = false
	if a.m != nil {
		w.charge(a.ts.tenant, a.m)
	}
	return a.m
}

// fetchTenant fetches up to n jobs from ts's consumer, in one request,
// creating the consumer when it is not there (new tenant, or removed after
// inactivity).
func (w *Worker) fetchTenant(src *pullSource, ts *tenantSource, n int) []jetstream.Msg {
	for attempt := 0; attempt < 2; attempt++ {
		if ts.cons == nil || attempt > 0 {
			c, err := w.tenantConsumer(src, ts)
			if err != nil {
				w.log.Warn("creating a tenant's consumer", "priority", src.prio, "bucket", src.bucket, "tenant", ts.tenant, "model", ts.model, "err", err)
				return nil
			}
			w.bindConsumer(c)
			ts.cons = c
		}
		batch, err := ts.cons.FetchNoWait(n)
		var ms []jetstream.Msg
		if err == nil {
			for m := range batch.Messages() {
				w.leases.hold(m)
				ms = append(ms, m)
			}
			err = batch.Error()
			w.cfg.Metrics.fetch(len(ms))
		}
		if err == nil || len(ms) > 0 {
			return ms
		}
		w.log.Debug("fetch from a tenant's consumer failed; recreating it", "tenant", ts.tenant, "err", err)
	}
	return nil
}

// tenantConsumer creates the consumer of src's class and ts's tenant and
// model (its model-less jobs' when ts.model is empty), or binds the one
// that exists as it is: it may have been made under another configuration
// (another ack wait, say), which only provisioning changes
// (contracts.EnsureStreams), so that workers of two configurations do not
// rewrite it in turn.
func (w *Worker) tenantConsumer(src *pullSource, ts *tenantSource) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ConsumerRecheck)
	defer cancel()
	cc := w.cfg.Streams.TenantConsumerConfig(src.prio, src.bucket, ts.tenant)
	if ts.model != "" {
		cc = w.cfg.Streams.ModelConsumerConfig(src.prio, src.bucket, ts.tenant, ts.model)
	}
	c, err := w.js.CreateConsumer(ctx, contracts.StreamJobs, cc)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		c, err = w.js.Consumer(ctx, contracts.StreamJobs, cc.Durable)
	}
	return c, err
}

// estimateTokens is a job's cost for fairness: its prompt estimated as the
// quota check estimates it (contracts.JobRequest.EstimatedPromptTokens)
// plus max_tokens (lim's default when unset); at least 1, whatever the
// body (the job itself is checked when it is handled).
func estimateTokens(body []byte, lim contracts.Limits) int {
	var r contracts.JobRequest
	if json.Unmarshal(body, &r) != nil {
		return 1
	}
	r.ApplyDefaults(lim)
	return max(r.EstimatedPromptTokens()+r.MaxTokens, 1)
}
