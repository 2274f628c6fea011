package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"

	"github.com/zerolayer/zerolayer/contracts"
)

// DefaultDurable is the name of the ingester's durable consumer on
// ZL_USAGE.
const DefaultDurable = "billing-ingest"

// maxTermReason bounds the reason sent with a terminated message (it goes
// into a JetStream advisory).
const maxTermReason = 256

// IngesterConfig configures NewIngester.
type IngesterConfig struct {
	// JetStream is the connection to consume ZL_USAGE with. When the
	// stream does not exist yet (billing started before the workers
	// provisioned it), the ingester creates it if Provision is set, else
	// waits for it. Required.
	JetStream jetstream.JetStream
	// Provision creates the streams (contracts.EnsureStreams with Streams)
	// when ZL_USAGE does not exist at Start. Defaults to false: the
	// ingester waits for a worker or an operator to create them.
	Provision bool
	// Streams configures the streams Provision creates. Zero fields take
	// the contract defaults.
	Streams contracts.StreamsConfig
	// DB is the billing database, migrated. Required.
	DB *pgxpool.Pool
	// River inserts the rating jobs; any client from NewRiver on DB will
	// do, an InsertOnly one included. Required.
	River *river.Client[pgx.Tx]
	// Durable is the durable consumer's name, shared by every ingester
	// process of one billing deployment. Defaults to DefaultDurable.
	Durable string
	// AckWait is how long JetStream waits for an ack before it delivers a
	// message again. Defaults to 30 seconds.
	AckWait time.Duration
	// MaxAckPending caps the messages delivered and not yet acked, for all
	// ingester processes together. Defaults to 256.
	MaxAckPending int
	// BatchSize is how many messages a process asks for in one pull
	// request (the next one goes out when they have all arrived, or the
	// request expired). Defaults to 32.
	BatchSize int
	// Workers is how many transactions store records at once. Each
	// worker stores the messages waiting for it, up to MaxBatch, in one
	// transaction; the records of one job always go to the same worker.
	// Keep it within the pool's connections. Defaults to 2 (on two cores,
	// two larger transactions store more records a second than eight
	// smaller ones).
	Workers int
	// MaxBatch is the most messages one transaction stores. Under load a
	// worker's batch fills up to it (or to its share of MaxAckPending);
	// a trickle is stored a message at a time. Defaults to 256.
	MaxBatch int
	// RateInBatches enqueues the rating of the records a transaction
	// stored as one RateBatchArgs job, instead of one RateArgs job per
	// record: River then writes one job row (inserted, fetched, completed)
	// per batch rather than per record, which is most of what rating costs
	// (see BenchmarkLedger). A record that cannot be rated yet still gets
	// a RateArgs job of its own. Defaults to false: one RateArgs job per
	// record, rated many at once by the River client (see RateArgs).
	RateInBatches bool
	// RetryDelay is how long a message waits for redelivery after a
	// database error. Defaults to 5 seconds.
	RetryDelay time.Duration
	// Logger receives the ingester's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c IngesterConfig) WithDefaults() IngesterConfig {
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 256
	}
	if c.BatchSize == 0 {
		c.BatchSize = 32
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c IngesterConfig) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.JetStream == nil:
		return bad("IngesterConfig.JetStream is nil; pass a jetstream.JetStream on the NATS connection")
	case c.DB == nil:
		return bad("IngesterConfig.DB is nil; pass the billing database pool")
	case c.River == nil:
		return bad("IngesterConfig.River is nil; pass a client from ledger.NewRiver")
	case c.AckWait < 100*time.Millisecond:
		return bad("IngesterConfig.AckWait %v is below 100ms; storing records takes a database transaction", c.AckWait)
	case c.MaxAckPending < 1:
		return bad("IngesterConfig.MaxAckPending %d must be at least 1", c.MaxAckPending)
	case c.BatchSize < 1 || c.BatchSize > c.MaxAckPending:
		return bad("IngesterConfig.BatchSize %d must be in [1, MaxAckPending %d]", c.BatchSize, c.MaxAckPending)
	case c.Workers < 1 || c.Workers > 1024:
		return bad("IngesterConfig.Workers %d must be in [1, 1024]", c.Workers)
	case c.MaxBatch < 1 || c.MaxBatch > 10_000:
		return bad("IngesterConfig.MaxBatch %d must be in [1, 10000]", c.MaxBatch)
	case c.RetryDelay < 0:
		return bad("IngesterConfig.RetryDelay %v is negative", c.RetryDelay)
	}
	return nil
}

// ConsumerConfig returns the durable pull consumer the ingester creates
// (or updates) on ZL_USAGE. It has no MaxDeliver: a record that cannot be
// stored because the database is down waits, RetryDelay apart, for as long
// as it takes; a record that can never be stored is terminated instead.
func (c IngesterConfig) ConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       c.Durable,
		Description:   "zerolayer billing: usage records into Postgres",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    -1,
		FilterSubject: contracts.SubjectUsageAll,
		MaxAckPending: c.MaxAckPending,
	}
}

// IngestStats counts what an Ingester did with the messages it was given.
type IngestStats struct {
	// Stored counts records stored, each enqueued for rating.
	Stored uint64
	// Duplicates counts messages whose job (of the same tenant) was stored
	// already (a redelivery, or a second record of one job): acked, not
	// billed again.
	Duplicates uint64
	// Terminated counts messages that can never be stored.
	Terminated uint64
	// Retried counts messages left for redelivery after a database error.
	Retried uint64
}

// Ingester moves usage records from ZL_USAGE into Postgres. It takes the
// messages in batches: for each message it decodes and validates the
// record, then in one transaction for the batch stores the records (unique
// on the tenant and job id: job ids are unique per tenant only; a record of
// a job stored already, or earlier in the batch, is left out) and, for the
// records it stored, inserts their rating jobs (InsertManyTx: a RateArgs
// job per record, or one RateBatchArgs job with RateInBatches); after the
// commit it acks each message. So a record is billed once however often it
// is delivered, and a record is acked only once it is safe. The job is
// identified by the subject's tenant and the body's job id, never by the
// message id (Nats-Msg-Id is JetStream's dedupe key, and
// its form is the publisher's business). A message that can never be stored
// (malformed, of an unsupported contract version, rejected by the
// database's checks) is terminated with the reason and logged; it stays
// in the stream, which keeps usage for months, for replay after a fix.
//
// A database error leaves the whole batch for redelivery (NakWithDelay):
// nothing of it was stored. A record the database rejects fails its
// batch's statement, so the batch is stored again a record at a time and
// only that record is terminated. Several processes may share the durable
// consumer.
type Ingester struct {
	cfg IngesterConfig

	mu      sync.Mutex
	running bool
	// stopPulls stops the fetch loops, pulls waits for them.
	stopPulls context.CancelFunc
	pulls     sync.WaitGroup
	cancel    context.CancelFunc
	work      []chan jetstream.Msg // to the workers, by tenant and job id
	wg        sync.WaitGroup       // the workers
	// stopWait and waitDone, while the ingester waits for its stream,
	// stop the waiter and report it ended.
	stopWait context.CancelFunc
	waitDone chan struct{}

	stored, duplicates, terminated, retried atomic.Uint64

	// afterCommit, when set (by tests), runs after a record's transaction
	// committed; returning false skips the ack, as a crash at that point
	// would.
	afterCommit func(tenant, jobID string, inserted bool, numDelivered uint64) bool
}

// NewIngester checks cfg and returns an ingester; Start starts it.
func NewIngester(cfg IngesterConfig) (*Ingester, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Ingester{cfg: cfg}, nil
}

// Stats returns the counts so far.
func (in *Ingester) Stats() IngestStats {
	return IngestStats{
		Stored:     in.stored.Load(),
		Duplicates: in.duplicates.Load(),
		Terminated: in.terminated.Load(),
		Retried:    in.retried.Load(),
	}
}

// Backlog is the usage records in ZL_USAGE the ingester has not stored
// yet: those its durable consumer has not delivered, and those delivered
// and not acknowledged. While billing is behind (or down) they accumulate
// there, within the stream's limits, and the workers go on serving.
func (in *Ingester) Backlog(ctx context.Context) (int64, error) {
	// Consumer reads the consumer's info: one round trip.
	c, err := in.cfg.JetStream.Consumer(ctx, contracts.StreamUsage, in.cfg.Durable)
	if err != nil {
		return 0, err
	}
	info := c.CachedInfo()
	return int64(info.NumPending) + int64(info.NumAckPending), nil
}

// Start creates or updates the durable consumer and starts consuming. ctx
// bounds only the start: the ingester runs until Stop. When ZL_USAGE does
// not exist yet, Start creates the streams if Provision is set; otherwise
// it logs once and returns, and the ingester waits for the stream in the
// background, looking again with a backoff of up to streamWaitMax, and
// starts consuming once it exists. Starting a running ingester does
// nothing; a stopped one can be started again. Start and Stop must not be
// called concurrently.
func (in *Ingester) Start(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.running {
		return nil
	}
	err := in.consume(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) && in.cfg.Provision {
		if err = contracts.EnsureStreams(ctx, in.cfg.JetStream, in.cfg.Streams); err != nil {
			return fmt.Errorf("billing: provision the streams: %w", err)
		}
		err = in.consume(ctx)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		in.cfg.Logger.Warn("billing: stream does not exist yet; waiting for it (a worker with provisioning on, or contracts.EnsureStreams, creates it)",
			"stream", contracts.StreamUsage)
		waitCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		in.stopWait, in.waitDone = stop, done
		go in.waitForStream(waitCtx, done)
		err = nil
	}
	if err != nil {
		return err
	}
	in.running = true
	return nil
}

// Backoff of the wait for ZL_USAGE.
const (
	streamWaitMin = 100 * time.Millisecond
	streamWaitMax = 5 * time.Second
)

// waitForStream tries to start consuming until it succeeds or ctx ends.
func (in *Ingester) waitForStream(ctx context.Context, done chan struct{}) {
	defer close(done)
	delay := streamWaitMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, streamWaitMax)
		in.mu.Lock()
		if ctx.Err() != nil {
			in.mu.Unlock()
			return
		}
		actx, cancel := context.WithTimeout(ctx, streamWaitMax)
		err := in.consume(actx)
		cancel()
		in.mu.Unlock()
		switch {
		case err == nil:
			in.cfg.Logger.Info("billing: stream exists now; consuming usage records", "stream", contracts.StreamUsage)
			return
		case !errors.Is(err, jetstream.ErrStreamNotFound) && ctx.Err() == nil:
			in.cfg.Logger.Warn("billing: waiting for the stream", "stream", contracts.StreamUsage, "error", err)
		}
	}
}

// consume creates or updates the durable consumer and starts consuming,
// setting cc, cancel and work. in.mu is held.
func (in *Ingester) consume(ctx context.Context) error {
	cons, err := in.cfg.JetStream.CreateOrUpdateConsumer(ctx, contracts.StreamUsage, in.cfg.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("billing: consumer %s on %s: %w", in.cfg.Durable, contracts.StreamUsage, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Records of one job always go to the same worker, in stream order,
	// so the first record of a job is the one stored, as with one worker.
	// A worker's channel holds every message it may be given (no more
	// than MaxAckPending are unacked), so that the fetch loop never waits
	// on a busy worker while the others idle.
	work := make([]chan jetstream.Msg, in.cfg.Workers)
	for i := range work {
		work[i] = make(chan jetstream.Msg, in.cfg.MaxAckPending)
		in.wg.Add(1)
		go func(ch chan jetstream.Msg) {
			defer in.wg.Done()
			for batch := range batches(ch, in.cfg.MaxBatch) {
				in.handle(runCtx, batch)
			}
		}(work[i])
	}
	// Fetch loops rather than Consume: under a burst, Consume's own
	// bookkeeping sometimes ended with no pull request on the server and
	// none on the way (the consumer's waiting pulls were 0 for as long as
	// the client took to miss two heartbeats; 1.9 s of 3 s in one 5,000-
	// record pipeline run), while a fetch ends for certain, with its batch
	// or its expiry, before the next one is sent. One loop, so that the
	// workers get the messages in stream order.
	pullCtx, stopPulls := context.WithCancel(runCtx)
	deliver := func(msg jetstream.Msg) { work[shard(msg, len(work))] <- msg }
	in.pulls.Add(1)
	go func() {
		defer in.pulls.Done()
		in.pull(pullCtx, cons, deliver)
	}()
	in.stopPulls, in.cancel, in.work = stopPulls, cancel, work
	return nil
}

// pull fetches messages and hands them to deliver until ctx ends. A
// message that arrives after that is handed back to the server at once
// (it would otherwise wait out AckWait before another process gets it).
func (in *Ingester) pull(ctx context.Context, cons jetstream.Consumer, deliver func(jetstream.Msg)) {
	backoff := streamWaitMin
	for ctx.Err() == nil {
		// The request expires on the server a little before fctx does
		// (FetchContext keeps a tenth of the time as grace); Stop's
		// cancel ends it at once.
		fctx, cancel := context.WithTimeout(ctx, ingestPullExpiry)
		batch, err := cons.Fetch(in.cfg.BatchSize, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			in.cfg.Logger.Warn("billing: pulling usage records", "consumer", in.cfg.Durable, "error", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, streamWaitMax)
			continue
		}
		backoff = streamWaitMin
		for msg := range batch.Messages() {
			if ctx.Err() != nil {
				msg.Nak()
				continue
			}
			deliver(msg)
		}
		cancel()
		if err := batch.Error(); err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			in.cfg.Logger.Warn("billing: pulling usage records", "consumer", in.cfg.Durable, "error", err)
		}
	}
}

// Stop stops consuming and waits until the messages already received are
// handled. If ctx ends first, the record being stored is abandoned (its
// transaction rolls back and the message is redelivered later) and Stop
// returns ctx.Err(). Stopping a stopped ingester does nothing.
func (in *Ingester) Stop(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.running {
		return nil
	}
	in.running = false
	if stop, done := in.stopWait, in.waitDone; stop != nil {
		// The waiter takes in.mu for each attempt: let it see the stop.
		in.stopWait, in.waitDone = nil, nil
		in.mu.Unlock()
		stop()
		<-done
		in.mu.Lock()
	}
	if in.stopPulls == nil {
		return nil // the stream never appeared
	}
	stopPulls, cancel, work := in.stopPulls, in.cancel, in.work
	in.stopPulls, in.cancel, in.work = nil, nil, nil
	stopPulls()
	in.pulls.Wait()
	// The fetch loop has returned: no more sends on work. The workers
	// store what they were given, unless ctx ends first.
	for _, ch := range work {
		close(ch)
	}
	done := make(chan struct{})
	go func() { in.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		cancel()
		<-done
		err = ctx.Err()
	}
	cancel()
	return err
}

// shard picks the worker of a message by its job: the tenant of its
// subject and the job id in its body (two records of one job may carry
// different message ids, and two tenants' jobs the same id), falling back
// to the subject alone for bodies that do not decode (they are terminated
// anyway).
func shard(msg jetstream.Msg, n int) int {
	var head struct {
		JobID string `json:"job_id"`
	}
	h := fnv.New32a()
	h.Write([]byte(msg.Subject()))
	if json.Unmarshal(msg.Data(), &head) == nil && head.JobID != "" {
		h.Write([]byte(" " + head.JobID)) // no subject holds a space
	}
	return int(h.Sum32() % uint32(n))
}

// batches yields the messages of ch in batches of up to max: a batch is
// the next message and those already waiting behind it. It ends when ch is
// closed and drained.
func batches(ch <-chan jetstream.Msg, max int) iter.Seq[[]jetstream.Msg] {
	return func(yield func([]jetstream.Msg) bool) {
		for msg := range ch {
			batch := []jetstream.Msg{msg}
		more:
			for len(batch) < max {
				select {
				case msg, ok := <-ch:
					if !ok {
						break more
					}
					batch = append(batch, msg)
				default:
					break more
				}
			}
			if !yield(batch) {
				return
			}
		}
	}
}

// ingestPullExpiry is how long one of the ingester's pull requests waits
// on the server for its batch to fill (the messages come as they are
// stored); with the client's second of grace, it bounds how long a request
// lost with a server restart goes unnoticed.
const ingestPullExpiry = 2 * time.Second

// inbound is one message of a batch and its decoded record.
type inbound struct {
	msg       jetstream.Msg
	log       *slog.Logger
	delivered uint64
	row       usageRow
	stored    bool
}

// handle stores a batch of messages' records and settles the messages.
func (in *Ingester) handle(ctx context.Context, msgs []jetstream.Msg) {
	ds := make([]*inbound, 0, len(msgs))
	for _, msg := range msgs {
		d := &inbound{msg: msg, log: in.cfg.Logger.With("subject", msg.Subject())}
		if md, err := msg.Metadata(); err == nil {
			d.row.streamSeq, d.delivered = md.Sequence.Stream, md.NumDelivered
			d.log = d.log.With("stream_seq", md.Sequence.Stream, "delivered", md.NumDelivered)
		}
		u, err := decodeMessage(msg)
		if err != nil {
			in.terminate(d.log, msg, err)
			continue
		}
		d.row.u, d.row.raw = u, msg.Data()
		d.log = d.log.With("tenant", u.Tenant, "job_id", u.JobID)
		ds = append(ds, d)
	}
	in.store(ctx, ds)
}

// store stores ds's records in one transaction with their rating jobs,
// then settles their messages.
func (in *Ingester) store(ctx context.Context, ds []*inbound) {
	if len(ds) == 0 {
		return
	}
	err := pgx.BeginFunc(ctx, in.cfg.DB, func(tx pgx.Tx) error {
		rows := make([]usageRow, len(ds))
		for i, d := range ds {
			rows[i] = d.row
		}
		stored, err := insertUsages(ctx, tx, rows)
		if err != nil {
			return err
		}
		var fresh []JobRef
		for i, d := range ds {
			if d.stored = stored[i]; d.stored {
				fresh = append(fresh, JobRef{d.row.u.Tenant, d.row.u.JobID})
			}
		}
		var jobs []river.InsertManyParams
		switch {
		case len(fresh) == 0:
			return nil
		case in.cfg.RateInBatches:
			jobs = []river.InsertManyParams{{Args: RateBatchArgs{Jobs: fresh}}}
		default:
			for _, j := range fresh {
				jobs = append(jobs, river.InsertManyParams{Args: RateArgs(j)})
			}
		}
		if _, err := in.cfg.River.InsertManyTx(ctx, tx, jobs); err != nil {
			return fmt.Errorf("billing: enqueue the rating of %d usage records: %w", len(fresh), err)
		}
		return nil
	})
	switch {
	case err != nil && permanent(err) && len(ds) > 1:
		// One record breaks a check of the schema, and the statement of
		// the batch with it: store them one by one, so that it alone is
		// terminated.
		for _, d := range ds {
			in.store(ctx, []*inbound{d})
		}
		return
	case err != nil && permanent(err):
		in.terminate(ds[0].log, ds[0].msg, err)
		return
	case err != nil:
		in.retried.Add(uint64(len(ds)))
		in.cfg.Logger.Warn("billing: usage records not stored; they will be delivered again",
			"records", len(ds), "retry_in", in.cfg.RetryDelay, "error", err)
		for _, d := range ds {
			if err := d.msg.NakWithDelay(in.cfg.RetryDelay); err != nil {
				d.log.Warn("billing: nak failed; the message comes back after AckWait", "error", err)
			}
		}
		return
	}
	for _, d := range ds {
		u := d.row.u
		if d.stored {
			in.stored.Add(1)
		} else {
			in.duplicates.Add(1)
			d.log.Info("billing: usage record of this job is stored already; not billing it again")
		}
		if in.afterCommit != nil && !in.afterCommit(u.Tenant, u.JobID, d.stored, d.delivered) {
			continue
		}
		if err := d.msg.Ack(); err != nil {
			// The record is stored; a redelivery will be recognized.
			d.log.Warn("billing: ack failed; the message will be delivered again and deduplicated", "error", err)
		}
	}
}

// terminate gives up on a message for good.
func (in *Ingester) terminate(log *slog.Logger, msg jetstream.Msg, cause error) {
	in.terminated.Add(1)
	reason := cause.Error()
	if len(reason) > maxTermReason {
		reason = reason[:maxTermReason]
	}
	log.Error("billing: usage record cannot be stored; terminating the message (it stays in the stream)", "error", cause)
	if err := msg.TermWithReason(reason); err != nil {
		log.Warn("billing: term failed", "error", err)
	}
}

// decodeMessage checks a message's contract version, subject and body.
func decodeMessage(msg jetstream.Msg) (contracts.Usage, error) {
	if err := contracts.CheckContract(msg.Headers()); err != nil {
		return contracts.Usage{}, fmt.Errorf("%w: %v", ErrInvalidUsage, err)
	}
	tenant, err := contracts.TenantFromUsageSubject(msg.Subject())
	if err != nil {
		return contracts.Usage{}, fmt.Errorf("%w: %v", ErrInvalidUsage, err)
	}
	u, err := contracts.DecodeUsage(msg.Data())
	if err != nil {
		return contracts.Usage{}, fmt.Errorf("%w: %w", ErrInvalidUsage, err)
	}
	if u.Tenant != tenant {
		return contracts.Usage{}, fmt.Errorf("%w: record of tenant %q published on %s", ErrInvalidUsage, u.Tenant, msg.Subject())
	}
	if err := CheckUsageInvariants(u); err != nil {
		return contracts.Usage{}, fmt.Errorf("%w: job %s: %w", ErrInvalidUsage, u.JobID, err)
	}
	return u, nil
}

// CheckUsageInvariants returns a *contracts.Error of code
// contracts.CodeUsageInvariant when u breaks a relation between its
// fields that pricing needs: cached_input_tokens at most input_tokens
// (the uncached input, input − cached, is what p_in prices). Such a
// record is refused, not billed with a guess.
func CheckUsageInvariants(u contracts.Usage) error {
	if u.CachedInputTokens > u.InputTokens {
		e := contracts.NewError(contracts.CodeUsageInvariant, "cached_input_tokens %d is above input_tokens %d, which counts them",
			u.CachedInputTokens, u.InputTokens)
		e.Field = "cached_input_tokens"
		return e
	}
	return nil
}

// permanent reports a database error that retrying cannot fix: the record
// breaks a check of the schema (class 22, data exception, or 23, integrity
// constraint violation).
func permanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23":
		return true
	}
	return false
}
