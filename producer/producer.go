package producer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/fleet"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
)

// Config configures a Client.
type Config struct {
	// Tenant is the tenant this client submits as: it comes from the
	// client's credentials (the NATS user is allowed to publish only on
	// its tenant's subjects), never from a request body. Required.
	Tenant string
	// Models maps model names to GGUF files whose tokenizers bucket the
	// prompts. Only metadata is read; weights are never loaded. A request
	// for a model not listed is bucketed by a byte estimate (4 bytes per
	// token), unless ServedOnly.
	Models map[string]string
	// ServedOnly says Models lists every model the workers serve: while
	// no worker is live in the fleet (ZL_WORKERS), a request for any
	// other is refused at Submit with CodeUnknownModel (HTTP 404) instead
	// of being queued to wait. While workers are live, the models they
	// serve (or served lately) decide, with or without it (CheckModel).
	// Set it only where the list is the served one (zerolayer dev), not
	// where it is merely the models a client has on disk.
	ServedOnly bool
	// Buckets are the prompt-length thresholds. Defaults to the contract's
	// (64 and 512 tokens).
	Buckets contracts.Buckets
	// Limits are the request limits checked before publishing. Zero fields
	// take the contract defaults.
	Limits contracts.Limits
	// Admitter, if set, checks the tenant's limits before each job is
	// published (quota.go). Defaults to none: the workers still check.
	Admitter Admitter
	// Fleet, if set, is the watch of the live workers that CheckModel
	// consults (shared by the gateway's clients); its owner stops it.
	// Defaults to nil: the client starts a watch of its own at its first
	// submit, stopped by Close.
	Fleet *fleet.Watch
}

// Client submits jobs and follows them. It is safe for concurrent use.
type Client struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream

	mu        sync.Mutex
	prompters map[string]*prompt.Prompter

	results resultWatch
	// liveEvents is set once JetStream's API has been found closed to
	// this client (a tenant's own NATS account): Events then follows live
	// events instead of replaying them with a consumer.
	liveEvents atomic.Bool
	// noLegacy is set once results stored in the old form (before ids
	// were scoped by tenant) have been found unreadable to this client.
	noLegacy atomic.Bool
	// ownFleet is the client's own fleet watch (fleet), when
	// Config.Fleet is nil: started at the first submit, and tried again
	// fleetRetry later while it cannot be started; fleetClosed stops that.
	fleetMu     sync.Mutex
	ownFleet    *fleet.Watch
	fleetTried  time.Time
	fleetClosed bool
}

// New returns a client on an established connection. The streams must
// exist (the worker or an operator provisions them).
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	if err := contracts.ValidateTenant(cfg.Tenant); err != nil {
		return nil, fmt.Errorf("producer: tenant: %w", err)
	}
	cfg.Buckets = cfg.Buckets.WithDefaults()
	if err := cfg.Buckets.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, nc: nc, js: js, prompters: map[string]*prompt.Prompter{}}
	c.results.waiters = map[string]map[chan []byte]bool{}
	return c, nil
}

// Close releases the tokenizer files and the results subscription.
func (c *Client) Close() error {
	c.results.close()
	c.fleetMu.Lock()
	c.fleetClosed = true // none is started after Close
	if c.ownFleet != nil {
		c.ownFleet.Stop()
	}
	c.fleetMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, p := range c.prompters {
		p.Close()
		delete(c.prompters, n)
	}
	return nil
}

// SubmitOpts are per-call options of Submit.
type SubmitOpts struct {
	// Trace is the W3C trace context to continue; a new trace is started
	// when zero.
	Trace contracts.Traceparent
}

// Submit validates req, assigns a job id when it has none, checks that a
// worker will run its model (CheckModel), buckets it by its prompt length
// in tokens, and publishes it on
// zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>. It returns once JetStream
// has stored the job. Job ids are unique per tenant: submitting an id again
// while its job is queued stores nothing, and once it has finished the
// worker serves the stored result instead of running it again; either way
// Submit returns the same id and the job runs once.
func (c *Client) Submit(ctx context.Context, req *contracts.JobRequest, opts *SubmitOpts) (string, error) {
	// SubmitMany's publish and wait, resends included, for one job.
	ids, errs := c.SubmitMany(ctx, []*contracts.JobRequest{req}, opts)
	return ids[0], errs[0]
}

// notStored is the error of a job id JetStream did not acknowledge: err,
// or unavailable when the acknowledgement never came within
// submitAckTimeout (while ctx allowed).
func (c *Client) notStored(ctx context.Context, id string, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return contracts.NewError(contracts.CodeUnavailable, "job %s: no acknowledgement from JetStream within %v; it may or may not be queued: submit again (the same id is safe)", id, submitAckTimeout)
	}
	return submitError(id, err)
}

// submitAckTimeout bounds the wait for JetStream's acknowledgement of one
// submitted job, and submitAttemptTimeout the wait for one publish's: a
// publish lost with its stream's leader is sent again after it, so that
// the leader's loss costs a submitter about that long, not the whole
// submitAckTimeout (the chaos run of issue 39: the 24 submits in flight
// when the ZL_JOBS leader went down waited 10 s each, and no job finished
// in those 10 s).
const (
	submitAckTimeout     = 10 * time.Second
	submitAttemptTimeout = time.Second
)

// connected refuses to submit job id while the connection is down
// (reconnecting): a publish then would wait in the client's buffer for a
// server that may be minutes away, and the caller is better told at once,
// with CodeUnavailable, that it may submit again (the same id is safe).
func (c *Client) connected(id string) error {
	if c.nc.IsConnected() {
		return nil
	}
	return contracts.NewError(contracts.CodeUnavailable, "job %s not queued: not connected to NATS (%s); submit again later (the same id is safe)", id, c.nc.Status())
}

// submitError is the error of a publish of job id that was not stored: a
// full queue is CodeOverloaded, NATS or JetStream out of reach
// CodeUnavailable; both are retryable (the same id is safe to submit
// again).
func submitError(id string, err error) error {
	if contracts.IsQueueFull(err) {
		return contracts.NewError(contracts.CodeOverloaded, "job %s not queued: the job queue is full (%v); the workers are behind, submit again later", id, err)
	}
	if contracts.IsUnreachable(err) {
		return contracts.NewError(contracts.CodeUnavailable, "job %s not queued: %v; submit again later (the same id is safe)", id, err)
	}
	return fmt.Errorf("producer: submit %s: %w", id, err)
}

// SubmitMany submits reqs as Submit does each, but publishes them all
// before it waits for JetStream's acknowledgements (up to submitManyChunk
// at a time), so that a bulk submission costs about one round trip per
// chunk rather than one per job. ids[i] and errs[i] are those of reqs[i];
// a request refused or not stored does not keep the others from being
// submitted.
func (c *Client) SubmitMany(ctx context.Context, reqs []*contracts.JobRequest, opts *SubmitOpts) (ids []string, errs []error) {
	ids, errs = make([]string, len(reqs)), make([]error, len(reqs))
	type sent struct {
		i int
		r *contracts.JobRequest
		m *nats.Msg
		f jetstream.PubAckFuture
	}
	done := func(s sent, err error) {
		if err != nil && !contracts.IsDuplicateJob(err) {
			c.forget(s.r)
			errs[s.i] = c.notStored(ctx, s.r.ID, err)
			return
		}
		ids[s.i] = s.r.ID
	}
	for lo := 0; lo < len(reqs); lo += submitManyChunk {
		var fs []sent
		for i := lo; i < min(lo+submitManyChunk, len(reqs)); i++ {
			r, m, err := c.prepare(reqs[i], opts)
			if err == nil {
				if err = c.connected(r.ID); err != nil {
					c.forget(r)
				}
			}
			if err != nil {
				errs[i] = err
				continue
			}
			f, err := c.js.PublishMsgAsync(m)
			if err != nil {
				c.forget(r)
				errs[i] = submitError(r.ID, err)
				continue
			}
			fs = append(fs, sent{i, r, m, f})
		}
		// A publish whose acknowledgement is lost (the stream's leader
		// went down with it, or the connection dropped after it went
		// out) is sent again after submitAttemptTimeout, until
		// submitAckTimeout: the job id makes a repeat safe (the stream
		// refuses a second copy as a duplicate, which counts as stored).
		// Then it is given up, as unavailable, and may be submitted again.
		deadline := time.Now().Add(submitAckTimeout)
		for len(fs) > 0 {
			actx, cancel := context.WithTimeout(ctx, min(submitAttemptTimeout, time.Until(deadline)))
			var lost []sent
			for _, s := range fs {
				var err error
				select {
				case <-s.f.Ok():
				case err = <-s.f.Err():
				case <-actx.Done():
					if ctx.Err() == nil && time.Until(deadline) > 0 {
						lost = append(lost, s)
						continue
					}
					err = actx.Err()
				}
				done(s, err)
			}
			cancel()
			fs = fs[:0]
			for _, s := range lost {
				f, err := c.js.PublishMsgAsync(s.m)
				if err != nil {
					done(s, err)
					continue
				}
				s.f = f
				fs = append(fs, s)
			}
		}
	}
	return ids, errs
}

// submitManyChunk is how many jobs SubmitMany publishes before it waits for
// their acknowledgements (the client's async publishes in flight are
// bounded too).
const submitManyChunk = 512

// prepare checks req and makes its message: a copy of req with its id,
// defaults and admission (Config.Admitter) done.
func (c *Client) prepare(req *contracts.JobRequest, opts *SubmitOpts) (*contracts.JobRequest, *nats.Msg, error) {
	r := *req
	if r.ID == "" {
		r.ID = NewJobID()
	}
	if err := r.Validate(c.cfg.Limits); err != nil {
		return nil, nil, err
	}
	if err := c.checkModel(r.Model, r.WaitForModel, !r.IsEmbedding()); err != nil {
		return nil, nil, err
	}
	r.ApplyDefaults(c.cfg.Limits)
	var n int
	var err error
	if r.IsEmbedding() {
		var counts []int
		counts, err = c.embeddingTokens(&r)
		if err != nil {
			return nil, nil, err
		}
		for i, k := range counts {
			// Refused here as the worker would refuse it.
			if ctx := c.modelContext(r.Model); ctx > 0 && k > ctx {
				return nil, nil, contracts.NewError(contracts.CodePromptTooLong, "embedding input %d is %d tokens; model %s has a context of %d", i, k, r.Model, ctx)
			}
			n += k
		}
	} else if n, err = c.PromptTokens(&r); err != nil {
		return nil, nil, err
	} else if ctx := c.modelContext(r.Model); ctx > 0 && n >= ctx {
		// Refused here as the worker would refuse it (no worker could
		// ever run it), rather than queued for one to do so.
		return nil, nil, contracts.NewError(contracts.CodePromptTooLong, "the prompt is %d tokens; model %s has a context of %d (with room for at least one generated token)", n, r.Model, ctx)
	}
	bucket := c.cfg.Buckets.Bucket(n)
	data, err := json.Marshal(&r)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > c.cfg.Limits.MaxRequestBytes {
		return nil, nil, contracts.NewError(contracts.CodeRequestTooLarge, "request is %d bytes, above the limit of %d", len(data), c.cfg.Limits.MaxRequestBytes)
	}
	tp := contracts.NewTraceparent()
	if opts != nil && !opts.Trace.IsZero() {
		tp = opts.Trace.Child()
	}
	m := &nats.Msg{Subject: contracts.JobSubject(r.EffectivePriority(), bucket, c.cfg.Tenant, r.Model, r.ID), Data: data,
		Header: contracts.NewHeader(c.cfg.Tenant, tp)}
	if err := c.admit(&r, n); err != nil {
		return nil, nil, err
	}
	return &r, m, nil
}

// CheckModel refuses a job for model with CodeUnknownModel (HTTP 404)
// when no worker will run it: workers are live (the ZL_WORKERS bucket,
// followed through Config.Fleet or the client's own watch) and none
// serves the model, nor served it within contracts.ModelsTTL; the
// message lists the models served. With no worker live (or the fleet out
// of this client's sight: a tenant's own NATS account) it refuses only
// with Config.ServedOnly, a model not in Config.Models. With wait set
// (JobRequest.WaitForModel) it refuses nothing: the job waits for a
// worker of its model, counted in zerolayer_jobs_waiting_unserved.
func (c *Client) CheckModel(model string, wait bool) *contracts.Error {
	return c.checkModel(model, wait, false)
}

// checkModel is CheckModel for a job that generates (generates) or
// embeds: a generation is refused, wait or not, for a model the live
// workers serve as embedding only (an encoder), with invalid_request.
func (c *Client) checkModel(model string, wait, generates bool) *contracts.Error {
	f := c.fleet()
	var st fleet.ModelState
	if f != nil && (generates || !wait) {
		st = f.Model(model)
	}
	switch {
	case generates && st.EmbeddingOnly:
		return contracts.NewError(contracts.CodeInvalidRequest, "model %q is an embedding model (an encoder): it embeds (embedding jobs, /v1/embeddings) and does not generate", model)
	case wait:
		return nil
	case st.LiveWorkers > 0 && st.Recent:
		return nil // served, or lately
	case st.LiveWorkers > 0:
		return f.Refusal(model, false)
	}
	if _, ok := c.cfg.Models[model]; c.cfg.ServedOnly && !ok {
		return contracts.NewError(contracts.CodeUnknownModel, "model %q is not served here", model)
	}
	return nil
}

// fleet returns the fleet watch: Config.Fleet, or the client's own, started
// on first use (nil while it cannot be started: the client then acts as
// if no worker were live, and tries again fleetRetry after its last try).
func (c *Client) fleet() *fleet.Watch {
	if c.cfg.Fleet != nil {
		return c.cfg.Fleet
	}
	c.fleetMu.Lock()
	defer c.fleetMu.Unlock()
	if c.ownFleet != nil || c.fleetClosed || (!c.fleetTried.IsZero() && time.Since(c.fleetTried) < fleetRetry) {
		return c.ownFleet
	}
	c.fleetTried = time.Now()
	w := fleet.New(c.js)
	ctx, cancel := context.WithTimeout(context.Background(), fleetStartTimeout)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		w.Stop()
		return nil
	}
	c.ownFleet = w
	return w
}

// fleetStartTimeout bounds a read of the fleet's buckets; fleetRetry is
// how long a client that could not read them (NATS unreachable at its
// first submit) acts as if no worker were live before it tries again.
const (
	fleetStartTimeout = 3 * time.Second
	fleetRetry        = 30 * time.Second
)

// PromptTokens counts the prompt tokens of req with its model's tokenizer
// and chat template, or estimates them from the byte length when the model
// is not configured. Inline <tool> blocks are taken out of the system
// prompt first, as the worker does, so both count the same prompt; a
// malformed block is refused here.
func (c *Client) PromptTokens(req *contracts.JobRequest) (int, error) {
	if req.IsEmbedding() {
		// Every input's tokens: what the job holds in the KV arena at
		// once, and what its bucket is chosen by.
		counts, err := c.embeddingTokens(req)
		n := 0
		for _, k := range counts {
			n += k
		}
		return n, err
	}
	system, _, err := contracts.ParseSystem(req.System)
	if err != nil {
		return 0, err
	}
	p, err := c.prompter(req.Model)
	if err != nil {
		return 0, err
	}
	if p == nil {
		n := len(system)
		for _, m := range req.Messages {
			n += len(m.Content)
		}
		return n/4 + 1, nil
	}
	ids, err := p.Conversation(system, prompt.Messages(req.Messages), nil)
	if err != nil {
		return 0, prompt.ContractError(err)
	}
	return len(ids), nil
}

// embeddingTokens counts each input of an embedding job in tokens: token
// arrays as they are, strings tokenized as the worker tokenizes them
// where the client has the model's file (Config.Models), else estimated
// (contracts.EmbeddingInput.EstimatedTokens).
func (c *Client) embeddingTokens(r *contracts.JobRequest) ([]int, error) {
	p, err := c.prompter(r.Model)
	if err != nil {
		return nil, err
	}
	counts := make([]int, len(r.Embedding.Input))
	for i, in := range r.Embedding.Input {
		counts[i] = in.EstimatedTokens()
		if in.Tokens == nil && p != nil {
			ids, err := p.Prompt(in.Text, prompt.Options{})
			if err != nil {
				return nil, prompt.ContractError(err)
			}
			counts[i] = len(ids)
		}
	}
	return counts, nil
}

// modelContext is the context length of model's GGUF file (Config.Models),
// 0 when the model is not configured or its file does not say.
func (c *Client) modelContext(model string) int {
	if p, err := c.prompter(model); err == nil && p != nil {
		return p.Context
	}
	return 0
}

func (c *Client) prompter(model string) (*prompt.Prompter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.prompters[model]; ok {
		return p, nil
	}
	path, ok := c.cfg.Models[model]
	if !ok {
		return nil, nil
	}
	p, err := prompt.Open(path)
	if err != nil {
		return nil, fmt.Errorf("producer: tokenizer of %s: %w", model, err)
	}
	c.prompters[model] = p
	return p, nil
}

// Events returns the job's events in order, following new ones until a
// terminal event (final or error). A client that sees a higher attempt than
// before discards what it built from the earlier one. The channel is closed
// after the terminal event, when ctx ends, or on error; then done waits
// until the follower has stopped and returns the error that ended it (nil
// after a terminal event or when ctx ended). A caller that stops reading
// early cancels ctx, then calls done.
//
// Where the client may use JetStream's API (the system account: the
// gateway, operators' tools) the events are replayed from the first. In a
// tenant's own NATS account, which has no JetStream API, they are followed
// live from the call on: a job that has already ended yields its terminal
// event, which carries the whole text; follow a job from its start by
// calling Events before its tokens flow (right after Submit), or read the
// result.
func (c *Client) Events(ctx context.Context, jobID string) (events <-chan contracts.Event, done func() error, err error) {
	follow, err := c.follower(ctx, jobID)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan contracts.Event, 64)
	var ferr error
	var once sync.Once
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer close(out)
		ferr = follow(func(ev contracts.Event) error {
			select {
			case out <- ev:
				return nil
			case <-ctx.Done():
				return errStopFollowing
			}
		})
	}()
	return out, func() error { once.Do(func() { <-stopped }); return ferr }, nil
}

// Follow calls fn with each of the job's events in order, as Events
// delivers them, on the calling goroutine (no goroutine and channel
// between the stream and fn, as a server relaying the events to its
// caller wants). It returns nil after fn has had the terminal event or
// when ctx ends, fn's error when fn returns one (the following stops
// there), or the error that stopped the following.
func (c *Client) Follow(ctx context.Context, jobID string, fn func(contracts.Event) error) error {
	follow, err := c.follower(ctx, jobID)
	if err != nil {
		return err
	}
	return follow(fn)
}

// errStopFollowing is Events' delivery ending the following of a job
// whose ctx ended: no error to report.
var errStopFollowing = errors.New("producer: stopped following")

// follower starts following the job's events (the consumer or the
// subscription is made before it returns, so nothing published after is
// missed) and returns the func that delivers them to fn until a terminal
// event, ctx's end or an error.
func (c *Client) follower(ctx context.Context, jobID string) (func(fn func(contracts.Event) error) error, error) {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, err
	}
	subject := contracts.EventsSubject(c.cfg.Tenant, jobID)
	var follow func(p *eventPump) error
	if !c.liveEvents.Load() {
		cons, err := c.js.OrderedConsumer(ctx, contracts.StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
		switch {
		case err == nil:
			follow = c.replayEvents(ctx, cons)
		case noJetStreamAPI(err):
			// No responders may also be a cluster between stream
			// leaders: only the unambiguous answers switch the client
			// for good; this call follows live either way.
			if !errors.Is(err, nats.ErrNoResponders) {
				c.liveEvents.Store(true)
			}
		default:
			return nil, err
		}
	}
	if follow == nil {
		var err error
		if follow, err = c.liveEventsOf(ctx, subject); err != nil {
			return nil, err
		}
	}
	return func(fn func(contracts.Event) error) error {
		err := follow(&eventPump{ctx: ctx, jobID: jobID, deliver: fn})
		if errors.Is(err, errStopFollowing) {
			return nil
		}
		return err
	}, nil
}

// noJetStreamAPI reports whether err says this connection may not use
// JetStream's API (its account has none, or its user lacks the permission).
func noJetStreamAPI(err error) bool {
	return errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrPermissionViolation)
}

// eventPump delivers decoded events until a terminal one.
type eventPump struct {
	ctx     context.Context
	jobID   string
	deliver func(contracts.Event) error
}

// send delivers one event body; done is true after a terminal event, when
// ctx ends, on a malformed body (err) or when the delivery fails (its
// error).
func (p *eventPump) send(data []byte) (done bool, err error) {
	var ev contracts.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return true, fmt.Errorf("producer: event of %s: %w", p.jobID, err)
	}
	if err := p.deliver(ev); err != nil {
		return true, err
	}
	if p.ctx.Err() != nil {
		return true, nil
	}
	return ev.Type.Terminal(), nil
}

// followHeartbeat is the idle heartbeat of an event consumer's pulls: the
// ordered consumer is made again after two are missed. In a cluster a
// just-made consumer's first pull is now and then lost (seen through the
// gateway on a three-node cluster: a streamed completion stalled 10.0 s,
// the library's 5 s default twice, in 4 of 6 runs of bench --fleet
// --cluster, while its job had ended in under a second); with 1 s the
// stall is 2 s at most, for one small message a second per followed job
// that is idle.
const followHeartbeat = time.Second

func (c *Client) replayEvents(ctx context.Context, cons jetstream.Consumer) func(p *eventPump) error {
	return func(p *eventPump) error {
		it, err := cons.Messages(jetstream.PullHeartbeat(followHeartbeat))
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		defer it.Stop()
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return err
				}
				return nil
			}
			if end, err := p.send(m.Data()); end {
				return err
			}
		}
	}
}

// liveRecheck is how often live following looks up the job's last stored
// event, in case a live message was lost (a reconnect, a slow consumer).
const liveRecheck = 2 * time.Second

func (c *Client) liveEventsOf(ctx context.Context, subject string) (func(p *eventPump) error, error) {
	msgs := make(chan *nats.Msg, 256)
	sub, err := c.nc.ChanSubscribe(subject, msgs)
	if err != nil {
		return nil, err
	}
	return func(p *eventPump) error {
		defer sub.Unsubscribe()
		// Subscribed first, then the stored last event: a job that ended
		// before the subscription is seen ended.
		last := func() (bool, error) {
			m, err := contracts.LastMsg(ctx, c.nc, contracts.StreamEvents, subject)
			if err != nil || m == nil {
				return ctx.Err() != nil, nil
			}
			var ev contracts.Event
			if json.Unmarshal(m.Data, &ev) != nil || !ev.Type.Terminal() {
				return false, nil
			}
			return p.send(m.Data)
		}
		if end, err := last(); end {
			return err
		}
		t := time.NewTicker(liveRecheck)
		defer t.Stop()
		for {
			var end bool
			var err error
			select {
			case m := <-msgs:
				end, err = p.send(m.Data)
			case <-t.C:
				end, err = last()
			case <-ctx.Done():
				return nil
			}
			if end {
				return err
			}
		}
	}, nil
}

// Wait returns the job's result, waiting for it when the job has not
// finished. All waits of a client share one subscription to its tenant's
// results (zl.results.<tenant>.*), so thousands of jobs can be waited for
// at once without a JetStream consumer each.
//
// Wait rides out NATS and JetStream being out of reach (a server
// restarting, a leader changing, the client reconnecting): it keeps
// waiting and looks the result up again every liveRecheck, and returns an
// error only when ctx ends, the connection is closed for good, or the job
// is unknown: a job that has no result and is not queued or running
// (ZL_JOBS holds no message of it) at two rechecks in a row is a
// CodeNotFound error, not a wait until ctx ends (a job submitted by then
// is found).
func (c *Client) Wait(ctx context.Context, jobID string) (*contracts.Result, error) {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, err
	}
	ch := make(chan []byte, 1)
	if err := c.results.add(c, jobID, ch); err != nil {
		return nil, err
	}
	defer c.results.remove(jobID, ch)
	if data := c.results.recent(jobID); data != nil {
		// Carried before this Wait began, and perhaps not stored yet.
		var r contracts.Result
		if json.Unmarshal(data, &r) == nil {
			return &r, nil
		}
	}
	t := time.NewTicker(liveRecheck)
	defer t.Stop()
	for rechecks, absent := 0, 0; ; {
		// Registered first, then looked up: a result published in
		// between comes through ch.
		res, err := c.result(ctx, jobID)
		switch {
		case res != nil:
			return res, nil
		case err != nil && !c.passing(ctx, err):
			return nil, err
		case err == nil && rechecks > 0:
			// Looked up again after a recheck: no result; is the job
			// queued? Twice not, a recheck apart (a cluster between
			// stream leaders may answer for a moment that it is not),
			// it is unknown.
			switch queued, qerr := c.queued(ctx, jobID); {
			case qerr == nil && !queued:
				if absent++; absent < 2 {
					break
				}
				if res, err := c.result(ctx, jobID); res != nil || err != nil && !c.passing(ctx, err) {
					return res, err // it finished in between
				}
				return nil, contracts.NewError(contracts.CodeNotFound, "job %s of tenant %s: no result, and it is not queued (never submitted, or expired)", jobID, c.cfg.Tenant)
			case qerr != nil && !errors.Is(qerr, errNoQueueView) && !c.passing(ctx, qerr):
				return nil, qerr
			default:
				absent = 0
			}
		}
		select {
		case data := <-ch:
			// The result itself, as it was published: a look-up now
			// could reach the stream a moment before it has stored the
			// message that the subscription already carried.
			var r contracts.Result
			if json.Unmarshal(data, &r) == nil {
				return &r, nil
			}
		case <-t.C: // a notice lost to a reconnect is found here
			rechecks++
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// passing reports whether err, met while ctx is still live, is NATS or
// JetStream out of reach for now (see contracts.IsUnreachable), or a
// look-up that timed out on its own: worth trying again.
func (c *Client) passing(ctx context.Context, err error) bool {
	if ctx.Err() != nil || c.nc.IsClosed() {
		return false
	}
	return contracts.IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded)
}

// queued reports whether ZL_JOBS holds a message of job id of this
// client's tenant: the job is waiting or running (a finished job's message
// is gone from the work queue, and its result stored before). A client
// without access to that API (a tenant account that imports only its own
// direct gets) gets an error, and Wait then goes on waiting.
func (c *Client) queued(ctx context.Context, jobID string) (bool, error) {
	// The current form (any model), then a worker's queue, then the
	// model-less form, which an earlier release queued.
	q, err := c.queuedOn(ctx, jobID, contracts.SubjectJobsPrefix+"*.*."+c.cfg.Tenant+".*."+jobID)
	if q || err != nil {
		return q, err
	}
	// Passed on to the worker holding its prompt's prefix (stored there
	// before the original is acked: never in neither place).
	if q, err = c.queuedOn(ctx, jobID, contracts.SubjectDirectJobsPrefix+"*.*.*."+c.cfg.Tenant+".*."+jobID); q || err != nil {
		return q, err
	}
	return c.queuedOn(ctx, jobID, contracts.ModellessJobSubject("*", "*", c.cfg.Tenant, jobID))
}

// queuedOn reports whether ZL_JOBS holds a message on subject (wildcards
// allowed), job id's.
func (c *Client) queuedOn(ctx context.Context, jobID, subject string) (bool, error) {
	body, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := c.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+contracts.StreamJobs, body)
	if err != nil {
		return false, err
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return false, fmt.Errorf("producer: looking for job %s in %s: %w", jobID, contracts.StreamJobs, err)
	}
	switch {
	case resp.Error == nil:
		return true, nil
	case resp.Error.Code == 404:
		return false, nil
	case resp.Error.ErrCode == jsNotEnabledForAccount || resp.Error.ErrCode == jsNotEnabled:
		return false, errNoQueueView
	default:
		return false, fmt.Errorf("producer: looking for job %s in %s: %d %s", jobID, contracts.StreamJobs, resp.Error.Code, resp.Error.Description)
	}
}

// errNoQueueView is queued's answer where the client has no JetStream API
// (a tenant's own account): it cannot tell a queued job from an unknown
// one.
var errNoQueueView = errors.New("producer: this client cannot see the job queue")

// JetStream's error codes for an account or server without JetStream
// (JSNotEnabledForAccountErr, JSNotEnabledErr).
const (
	jsNotEnabledForAccount = 10039
	jsNotEnabled           = 10076
)

// result returns the job's stored result, or nil.
func (c *Client) result(ctx context.Context, jobID string) (*contracts.Result, error) {
	m, err := contracts.LastMsg(ctx, c.nc, contracts.StreamResults, contracts.ResultsSubject(c.cfg.Tenant, jobID))
	if err != nil || m == nil {
		return nil, err
	}
	var r contracts.Result
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("producer: result of %s: %w", jobID, err)
	}
	return &r, nil
}

// resultWatch is a client's one subscription to its tenant's results,
// handing each job's waiters its result as it is published.
//
// A result the subscription carries while nobody waits for it is kept a
// short while (keptFor, at most keptBytes in all): the stream stores a
// message a moment after the server hands it to subscribers, so a Wait
// that begins in that moment would find it neither stored nor coming, and
// would take a recheck (2 s) to see it.
type resultWatch struct {
	mu      sync.Mutex
	sub     *nats.Subscription
	waiters map[string]map[chan []byte]bool
	kept    map[string]keptResult
	order   []keptResult // oldest first
	bytes   int
}

type keptResult struct {
	jobID string
	at    time.Time
	data  []byte
}

const (
	keptFor   = 10 * time.Second
	keptBytes = 8 << 20
)

// recent returns the result of jobID that the subscription carried with
// no waiter in the last keptFor, or nil.
func (w *resultWatch) recent(jobID string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kept[jobID].data
}

// keep remembers data as the latest result of jobID and forgets the
// oldest kept results past keptFor or keptBytes. w.mu is held.
func (w *resultWatch) keep(jobID string, data []byte, now time.Time) {
	if w.kept == nil {
		w.kept = map[string]keptResult{}
	}
	k := keptResult{jobID, now, data}
	w.bytes += len(data) - len(w.kept[jobID].data)
	w.kept[jobID] = k
	w.order = append(w.order, k)
	n := 0
	for ; n < len(w.order); n++ {
		o := w.order[n]
		if now.Sub(o.at) < keptFor && w.bytes <= keptBytes {
			break
		}
		// Forgotten unless the job's result was carried again since.
		if cur, ok := w.kept[o.jobID]; ok && cur.at.Equal(o.at) {
			w.bytes -= len(cur.data)
			delete(w.kept, o.jobID)
		}
	}
	if n > 0 {
		w.order = append(w.order[:0], w.order[n:]...)
	}
}

func (w *resultWatch) add(c *Client, jobID string, ch chan []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub == nil {
		sub, err := c.nc.Subscribe(contracts.ResultsFilter(c.cfg.Tenant), w.notify)
		if err != nil {
			return fmt.Errorf("producer: subscribing to results: %w", err)
		}
		// Never drop a result for a slow reader.
		sub.SetPendingLimits(-1, 64<<20)
		// The server has the subscription once a flush returns: a
		// result published after the look-up that follows is then
		// carried to the waiter, not missed until the recheck (the
		// first Wait of a client took 2 s now and then).
		if err := c.nc.Flush(); err != nil {
			sub.Unsubscribe()
			return fmt.Errorf("producer: subscribing to results: %w", err)
		}
		w.sub = sub
	}
	if w.waiters[jobID] == nil {
		w.waiters[jobID] = map[chan []byte]bool{}
	}
	w.waiters[jobID][ch] = true
	return nil
}

func (w *resultWatch) remove(jobID string, ch chan []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiters[jobID], ch)
	if len(w.waiters[jobID]) == 0 {
		delete(w.waiters, jobID)
	}
}

func (w *resultWatch) notify(m *nats.Msg) {
	ref, err := contracts.JobRefFromSubject(m.Subject)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters[ref.JobID]) == 0 {
		w.keep(ref.JobID, m.Data, time.Now())
		return
	}
	for ch := range w.waiters[ref.JobID] {
		select {
		case ch <- m.Data:
		default:
		}
	}
}

func (w *resultWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != nil {
		w.sub.Unsubscribe()
		w.sub = nil
	}
}

// Cancel asks the job to stop: a cancel request on
// zl.cancel.<tenant>.<job_id>, stored in ZL_CANCEL (so a worker that has
// not started the job never runs it) and heard by the worker running it
// (which stops at the next step). It names this client's tenant, so it can
// only ever cancel this tenant's job of that id. Canceling a finished job
// does nothing.
func (c *Client) Cancel(ctx context.Context, jobID string) error {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return err
	}
	if _, err := c.js.Publish(ctx, contracts.CancelSubject(c.cfg.Tenant, jobID), nil); err != nil {
		return fmt.Errorf("producer: cancel %s: %w", jobID, err)
	}
	return nil
}

// NewJobID returns a random job id: 32 lowercase hex digits.
func NewJobID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Tenant returns the tenant the client submits as.
func (c *Client) Tenant() string { return c.cfg.Tenant }
