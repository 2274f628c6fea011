package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
)

// Causes of a job context's cancellation.
var (
	errCanceledByClient = errors.New("worker: canceled by the submitter")
	errShutdown         = errors.New("worker: shutting down")
)

// Worker pulls jobs from the ZL_JOBS consumers it is configured for (for
// the models it serves: Config.Models), runs them on an Executor, and
// publishes their events, results and usage. It announces itself and its
// models in the ZL_WORKERS bucket while it runs (fleet.go).
//
// Lifecycle: Start begins pulling; Stop stops pulling, lets running jobs
// finish until its context ends, then hands the rest back to JetStream
// (Nak) so another worker runs them. Both are idempotent.
type Worker struct {
	cfg  Config
	nc   *nats.Conn
	js   jetstream.JetStream
	exec Executor
	log  *slog.Logger

	mu        sync.Mutex
	started   bool
	stopped   bool
	consumers []*pullSource // highest priority first
	aged      []*pullSource // the same, lowest priority first
	subs      []*nats.Subscription
	wake      chan struct{}
	arrived   chan arrival    // answers to pulls waiting on the server (fair.go)
	ready     []jetstream.Msg // fetched in a batch, not yet given a slot (intake loop only)
	pulls     sync.WaitGroup  // those pulls' goroutines
	quit      chan struct{}   // closed by Stop: no new pulls
	loopDone  chan struct{}
	jobs      sync.WaitGroup
	running   map[contracts.JobRef]context.CancelCauseFunc
	fair      fairness
	runCtx    context.Context // parent of job contexts; canceled to hand jobs back
	cancelRun context.CancelCauseFunc
	// leases keeps every job message the worker holds alive (lease.go),
	// from its pull to its ack, nak or term.
	leases     leases
	leaseStop  chan struct{} // closed by Stop once no job is held
	leasesDone chan struct{}
	// missing counts the class consumers found missing and not
	// recreated (consumers.go), for Ready.
	missing atomic.Int32
	// infos describe the served models (ModelDescriber), if the executor
	// does; byToken maps each served model's token (contracts.ModelToken)
	// to its name.
	infos   []ModelInfo
	byToken map[string]string
	// beat is the heartbeat in ZL_WORKERS (fleet.go).
	beat heartbeat
	// aff is the prefix-affinity state (affinity.go).
	aff affinity
}

// pullSource is one class's consumer. Only the intake loop touches it
// after Start.
type pullSource struct {
	prio   contracts.Priority
	bucket contracts.Bucket
	cons   jetstream.Consumer
	// missing is set while the consumer is gone and could not be
	// recreated; checked is when it was last looked up.
	missing bool
	checked time.Time
	// legacy is set while jobs of the old subject form may be queued in
	// the class (the class consumer serves them); tenants are the
	// class-and-tenant consumers, one per served model and one for the
	// model-less form (fair.go), by sourceKey.
	legacy  bool
	tenants map[sourceKey]*tenantSource
}

// New returns a worker; it does nothing until Start.
func New(nc *nats.Conn, exec Executor, cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var infos []ModelInfo
	if d, ok := exec.(ModelDescriber); ok {
		infos = d.ModelInfos()
		cfg.Metrics.SetModelInfo(infos)
		if len(cfg.Models) == 0 {
			for _, i := range infos {
				cfg.Models = append(cfg.Models, i.Name)
			}
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, nc: nc, js: js, exec: exec, log: cfg.Logger.With("worker", cfg.ID), infos: infos, byToken: map[string]string{},
		wake: make(chan struct{}, 1), arrived: make(chan arrival), running: map[contracts.JobRef]context.CancelCauseFunc{}, fair: fairness{served: map[string]float64{}}}
	for _, m := range cfg.Models {
		w.byToken[contracts.ModelToken(m)] = m
	}
	w.leases.bound(cfg.Streams.AckWait)
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start checks the NATS server is recent enough (contracts.CheckServer),
// provisions the streams when configured to, binds the consumers and
// starts pulling. It returns once the worker is pulling.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if err := contracts.CheckServer(w.nc); err != nil {
		return err
	}
	if w.cfg.Provision {
		if err := contracts.EnsureStreams(ctx, w.js, w.cfg.Streams); err != nil {
			return err
		}
	}
	w.consumers, w.aged = nil, nil // (a failed Start may have bound some)
	for _, p := range w.cfg.Priorities {
		for _, b := range w.cfg.Buckets {
			c, err := w.js.Consumer(ctx, contracts.StreamJobs, contracts.ConsumerName(p, b))
			if err != nil {
				return fmt.Errorf("worker: consumer %s: %w (are the streams provisioned? run with provisioning on)", contracts.ConsumerName(p, b), err)
			}
			w.bindConsumer(c)
			w.consumers = append(w.consumers, &pullSource{prio: p, bucket: b, cons: c})
			w.cfg.Metrics.consumerMissing(p, b, false)
		}
	}
	for i := len(w.consumers) - 1; i >= 0; i-- {
		w.aged = append(w.aged, w.consumers[i])
	}
	if _, err := w.js.Stream(ctx, contracts.StreamCancel); err != nil {
		return fmt.Errorf("worker: stream %s: %w (are the streams provisioned? run with provisioning on)", contracts.StreamCancel, err)
	}
	// ZL_JOBS republishes each stored job's headers: wake the intake on
	// them instead of polling. (The publish subject itself can reach a
	// subscriber before the stream has stored the job; the notice comes
	// after, and names the consumer to pull from.)
	s1, err := w.nc.Subscribe(contracts.SubjectStoredJobsAll, func(m *nats.Msg) { w.notice(m.Subject); w.poke() })
	if err != nil {
		return err
	}
	if adm, ok := w.exec.(Admitter); ok {
		// A job Admits turned away is pulled as soon as there is room.
		adm.OnCapacity(w.poke)
	}
	// A cancel request is stored in ZL_CANCEL (looked up before a job
	// runs) and heard here by whoever runs the job. Its subject names the
	// tenant that asked, and only that tenant's job of that id stops.
	s2, err := w.nc.Subscribe(contracts.SubjectCancelAll, func(m *nats.Msg) {
		ref, err := contracts.JobRefFromSubject(m.Subject)
		if err == nil {
			w.cancelJob(ref)
		}
	})
	if err != nil {
		s1.Unsubscribe()
		return err
	}
	if err := w.startHeartbeat(ctx); err != nil {
		s1.Unsubscribe()
		s2.Unsubscribe()
		return err
	}
	w.startAffinity(ctx)
	w.subs = []*nats.Subscription{s1, s2}
	w.scanTenants(true)
	w.runCtx, w.cancelRun = context.WithCancelCause(context.Background())
	w.quit, w.loopDone = make(chan struct{}), make(chan struct{})
	w.leaseStop, w.leasesDone = make(chan struct{}), make(chan struct{})
	w.started = true
	go w.keepLeases(w.leaseStop, w.leasesDone)
	go w.loop()
	w.log.Info("worker started", "models", w.cfg.Models, "priorities", w.cfg.Priorities, "buckets", w.cfg.Buckets, "concurrency", w.cfg.Concurrency, "device", w.exec.Device())
	return nil
}

// Ready reports whether the worker serves jobs, for a readiness probe: nil
// from the return of Start until Stop, while the NATS connection is up and
// every class consumer the worker pulls from exists; otherwise an error
// saying why not. The models are loaded before then (New takes an
// Executor that has them).
func (w *Worker) Ready() error {
	w.mu.Lock()
	started, stopped := w.started, w.stopped
	w.mu.Unlock()
	switch {
	case !started:
		return errors.New("worker not started")
	case stopped:
		return errors.New("worker stopping")
	}
	if st := w.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("NATS connection %s", st)
	}
	if n := w.missing.Load(); n > 0 {
		return fmt.Errorf("%d %s consumer(s) missing", n, contracts.StreamJobs)
	}
	return nil
}

// Stop stops pulling and waits for running jobs until ctx ends; jobs still
// running then are canceled and handed back to JetStream for another
// worker. It returns ctx.Err() when it had to hand jobs back.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	close(w.quit)
	for _, s := range w.subs {
		if s.Subject != contracts.SubjectCancelAll {
			s.Unsubscribe()
		}
	}
	w.mu.Unlock()
	w.stopHeartbeat() // out of the fleet: it pulls nothing more
	<-w.loopDone
	w.stopAffinity()
	w.pulls.Wait() // a job they bring now is handed back
	done := make(chan struct{})
	go func() { w.jobs.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		w.cancelRun(errShutdown)
		<-done
	}
	w.cancelRun(errShutdown)
	close(w.leaseStop) // every job is acked, naked or termed
	<-w.leasesDone
	for _, s := range w.subs {
		s.Unsubscribe()
	}
	w.log.Info("worker stopped", "handed_back", err != nil)
	return err
}

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) cancelJob(ref contracts.JobRef) {
	w.mu.Lock()
	cancel := w.running[ref]
	w.mu.Unlock()
	if cancel != nil {
		cancel(errCanceledByClient)
	}
}

// loop runs one job per free slot.
func (w *Worker) loop() {
	defer close(w.loopDone)
	defer func() {
		// Fetched in a batch and never started: back to JetStream now,
		// not after AckWait.
		for _, m := range w.ready {
			m.Nak()
			w.leases.release(m)
		}
		w.ready = nil
	}()
	slots := make(chan struct{}, w.cfg.Concurrency)
	for pulls := 0; ; pulls++ {
		select {
		case slots <- struct{}{}:
		case <-w.quit:
			return
		}
		msg := w.next(pulls, cap(slots)-len(slots)+1)
		if msg == nil {
			return
		}
		w.jobs.Add(1)
		go func() {
			defer w.jobs.Done()
			defer func() { <-slots }()
			defer w.leases.release(msg) // held since its pull
			w.handle(msg)
		}()
	}
}

// agingEvery makes every n-th pull start from a lower class, so low
// priority jobs are taken even under a steady stream of high ones.
const agingEvery = 8

// fetchBatchMax is the most jobs the intake fetches in one request.
const fetchBatchMax = 64

// next returns the next message, preferring higher priorities, or nil when
// the worker is stopping. free is the slots free for jobs, this one's
// included: it fetches up to that many at once (as many as the executor
// admits), and hands the rest out on the next calls.
func (w *Worker) next(pulls, free int) jetstream.Msg {
	for {
		if len(w.ready) > 0 {
			m := w.ready[0]
			w.ready = w.ready[1:]
			return m
		}
		order := w.consumers
		if pulls%agingEvery == agingEvery-1 {
			order = w.aged // lowest class first this time
		}
		adm, _ := w.exec.(Admitter)
		select {
		case a := <-w.arrived:
			if m := w.take(a); m != nil {
				return m
			}
		default:
		}
		w.absorb()
		w.scanTenants(false)
		if time.Since(w.fair.lastRetry) >= w.cfg.IdlePoll {
			w.retryAll()
		}
		// Jobs passed on to this worker (it holds their prefix) first,
		// and jobs left waiting too long in other workers' queues.
		direct := func() int {
			n := min(free, fetchBatchMax)
			if adm != nil {
				n = min(n, adm.Admits("", contracts.PriorityNormal, contracts.BucketShort, ""))
			}
			return n
		}
		if m := w.pullDirect(direct); m != nil {
			return m
		}
		for _, src := range order {
			select {
			case <-w.quit:
				return nil
			default:
			}
			// Room for a source's jobs: its model's (any model's for the
			// model-less forms, whose jobs for another model are passed on
			// at once: job.go).
			room := func(ts *tenantSource) int {
				n := min(free, fetchBatchMax)
				if adm != nil {
					var model, tenant string
					if ts != nil {
						model, tenant = ts.model, ts.tenant
					}
					n = min(n, adm.Admits(model, src.prio, src.bucket, tenant))
				}
				return n
			}
			if m := w.pullFair(src, room); m != nil {
				return m
			}
			if !src.legacy || room(nil) == 0 {
				continue // (or leave it for a worker with room)
			}
			if src.missing && !w.restore(src) {
				continue
			}
			batch, err := src.cons.FetchNoWait(1)
			if err == nil {
				for m := range batch.Messages() {
					w.leases.hold(m)
					return m
				}
				err = batch.Error()
				if err == nil {
					src.legacy = false // the old-form jobs have drained
				}
			}
			if err != nil {
				// A deleted consumer answers with no responders (or
				// "consumer deleted" to a pending pull): look it up.
				w.log.Warn("fetch failed", "priority", src.prio, "bucket", src.bucket, "err", err)
				w.restore(src)
			}
		}
		// Nothing fetched: wait for the next notice, the answer to a pull
		// waiting on the server, or IdlePoll (redelivered jobs publish no
		// notice).
		select {
		case <-w.wake:
		case a := <-w.arrived:
			if m := w.take(a); m != nil {
				return m
			}
		case <-time.After(w.cfg.IdlePoll):
			w.retryAll()
		case <-w.quit:
			return nil
		}
	}
}
