package producer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/zerolayer/zerolayer/contracts"
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
	// token).
	Models map[string]string
	// Buckets are the prompt-length thresholds. Defaults to the contract's
	// (64 and 512 tokens).
	Buckets contracts.Buckets
	// Limits are the request limits checked before publishing. Zero fields
	// take the contract defaults.
	Limits contracts.Limits
	// Admitter, if set, checks the tenant's limits before each job is
	// published (quota.go). Defaults to none: the workers still check.
	Admitter Admitter
}

// Client submits jobs and follows them. It is safe for concurrent use.
type Client struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream

	mu        sync.Mutex
	prompters map[string]*prompt.Prompter
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
	return &Client{cfg: cfg, nc: nc, js: js, prompters: map[string]*prompt.Prompter{}}, nil
}

// Close releases the tokenizer files.
func (c *Client) Close() error {
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

// Submit validates req, assigns a job id when it has none, buckets it by
// its prompt length in tokens, and publishes it on
// zl.jobs.<priority>.<bucket>.<tenant>. It returns once JetStream has
// stored the job. Submitting the same id again within the duplicate window
// stores nothing and returns the same id: the job runs once.
func (c *Client) Submit(ctx context.Context, req *contracts.JobRequest, opts *SubmitOpts) (string, error) {
	r := *req
	if r.ID == "" {
		r.ID = NewJobID()
	}
	if err := r.Validate(c.cfg.Limits); err != nil {
		return "", err
	}
	r.ApplyDefaults(c.cfg.Limits)
	n, err := c.PromptTokens(&r)
	if err != nil {
		return "", err
	}
	bucket := c.cfg.Buckets.Bucket(n)
	data, err := json.Marshal(&r)
	if err != nil {
		return "", err
	}
	if len(data) > c.cfg.Limits.MaxRequestBytes {
		return "", contracts.NewError(contracts.CodeRequestTooLarge, "request is %d bytes, above the limit of %d", len(data), c.cfg.Limits.MaxRequestBytes)
	}
	tp := contracts.NewTraceparent()
	if opts != nil && !opts.Trace.IsZero() {
		tp = opts.Trace.Child()
	}
	m := &nats.Msg{Subject: contracts.JobSubject(r.EffectivePriority(), bucket, c.cfg.Tenant), Data: data,
		Header: contracts.NewHeader(r.ID, c.cfg.Tenant, tp)}
	if err := c.admit(&r, n); err != nil {
		return "", err
	}
	if _, err := c.js.PublishMsg(ctx, m); err != nil {
		c.forget(&r)
		return "", fmt.Errorf("producer: submit %s: %w", r.ID, err)
	}
	return r.ID, nil
}

// PromptTokens counts the prompt tokens of req with its model's tokenizer
// and chat template, or estimates them from the byte length when the model
// is not configured. Inline <tool> blocks are taken out of the system
// prompt first, as the worker does, so both count the same prompt; a
// malformed block is refused here.
func (c *Client) PromptTokens(req *contracts.JobRequest) (int, error) {
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

// Events returns the job's events in order, from the first, following new
// ones until a terminal event (final or error). A client that sees a higher
// attempt than before discards what it built from the earlier one. The
// channel is closed after the terminal event, when ctx ends, or on error
// (reported by the returned func).
func (c *Client) Events(ctx context.Context, jobID string) (<-chan contracts.Event, func() error, error) {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, nil, err
	}
	cons, err := c.js.OrderedConsumer(ctx, contracts.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.EventsSubject(jobID)}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, nil, err
	}
	out := make(chan contracts.Event, 64)
	var ferr error
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		it, err := cons.Messages()
		if err != nil {
			ferr = err
			return
		}
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		defer it.Stop()
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					ferr = err
				}
				return
			}
			var ev contracts.Event
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				ferr = fmt.Errorf("producer: event of %s: %w", jobID, err)
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Type.Terminal() {
				return
			}
		}
	}()
	return out, func() error { once.Do(func() { <-done }); return ferr }, nil
}

// Wait returns the job's result, waiting for it when the job has not
// finished.
func (c *Client) Wait(ctx context.Context, jobID string) (*contracts.Result, error) {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return nil, err
	}
	cons, err := c.js.OrderedConsumer(ctx, contracts.StreamResults, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{contracts.ResultsSubject(jobID)}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return nil, err
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var r contracts.Result
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			return nil, fmt.Errorf("producer: result of %s: %w", jobID, err)
		}
		return &r, nil
	}
}

// Cancel asks the job to stop: a marker in the cancel bucket (so a worker
// that has not started it never runs it) and a message on
// zl.cancel.<job_id> (so the worker running it stops at the next step).
// Canceling a finished job does nothing.
func (c *Client) Cancel(ctx context.Context, jobID string) error {
	if err := contracts.ValidateJobID(jobID); err != nil {
		return err
	}
	kv, err := c.js.KeyValue(ctx, contracts.CancelBucket)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, jobID, []byte(c.cfg.Tenant)); err != nil {
		return err
	}
	return c.nc.Publish(contracts.CancelSubject(jobID), []byte(c.cfg.Tenant))
}

// NewJobID returns a random job id: 32 lowercase hex digits.
func NewJobID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Tenant returns the tenant the client submits as.
func (c *Client) Tenant() string { return c.cfg.Tenant }
