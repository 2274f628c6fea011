package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// Scenarios are the queue benchmark's scenarios, in the order Queue runs
// them.
func Scenarios() []string { return []string{"fairness", "priority", "pressure", "seed", "toolchain"} }

// StackFunc starts a dev stack for one scenario of Queue, its scheduler
// configured as o says. Queue stops the stack when the scenario ends.
type StackFunc func(ctx context.Context, o StackOpts) (*devstack.Stack, error)

// StackOpts are what a scenario asks of its stack's scheduler.
type StackOpts struct {
	// KVBlocks is the arena in blocks; 0 means the serving default.
	KVBlocks int
	// MaxRunning caps the batch; 0 means the serving default.
	MaxRunning int
	// Metrics receives the scheduler's measurements.
	Metrics *sched.Metrics
	// TenantWeights are the worker's tenant weights; nil: all 1.
	TenantWeights map[string]float64
}

// QueueConfig configures Queue. The sizes default to the published run
// (issue 12); Scale shrinks the job counts for a smaller machine, and a
// test gives small sizes and prompt lengths that fit its model.
type QueueConfig struct {
	// Scenarios are those to run, of Scenarios(). Defaults to all.
	Scenarios []string
	// Stack starts a stack per scenario. Required.
	Stack StackFunc
	// Scale multiplies every job count (at least one job of each kind
	// remains). Defaults to 1.
	Scale float64

	// PromptTokens and MaxTokens are the shape of an ordinary job:
	// fairness's, priority's and pressure's. Default to 38 and 96.
	PromptTokens, MaxTokens int
	// FairFirst and FairLate are the jobs of the tenant that submits first
	// and of the one that submits FairDelay later; the reverse order swaps
	// the counts. Default to 200, 20 and 3 seconds.
	FairFirst, FairLate int
	FairDelay           time.Duration
	// FairMaxRunning caps the fairness scenario's batch so that both
	// tenants are backlogged in the worker, which is where token shares
	// are decided, in either order: the smaller tenant's jobs (FairLate,
	// scaled) outnumber the whole batch, and so also its half. With a
	// batch larger than a tenant's jobs, all of them run at once and its
	// share is its demand (max-min fairness), not its weight. Defaults to
	// ¾ of the scaled FairLate rounded down to even (an odd batch cannot
	// split evenly), at least 4; negative means the serving default.
	FairMaxRunning int
	// FairWeight is tenant-b's weight against tenant-a's 1 in the
	// fairness scenario (worker TenantWeights), in both orders. Defaults
	// to 1.
	FairWeight float64
	// Backlog and Probes are priority's low-priority backlog and its
	// high-priority jobs, submitted ProbeGap apart. Default to 150, 10
	// and 300 ms.
	Backlog, Probes int
	ProbeGap        time.Duration
	// PressureBlocks is the arena of the pressure scenario, PressureJobs
	// its ordinary jobs and LowLatencyJobs its low_latency ones (submitted
	// ProbeGap·3 apart). Default to 21 blocks, 30 and 4.
	PressureBlocks, PressureJobs, LowLatencyJobs int
	// MixJobs is the mixed-length part of seed: half shorter than 64
	// tokens, 30% MidPrompt and 20% LongPrompt tokens. Defaults to 40,
	// 256 and 1,024.
	MixJobs, MidPrompt, LongPrompt int
	// EvictLong and EvictShort are the long-and-short part: jobs of
	// EvictLongTokens and of 32 tokens; SerialSample jobs of each kind
	// then run one at a time, to estimate the serial time. Default to 20,
	// 100, 512 and 3.
	EvictLong, EvictShort, EvictLongTokens, SerialSample int
	// SharedJobs share a system prompt of SystemTokens. Default to 50 and
	// 400.
	SharedJobs, SystemTokens int
	// Decoders generate DecodeTokens each while a prompt of HugePrompt
	// tokens arrives. Default to 8, 128 and 1,491.
	Decoders, DecodeTokens, HugePrompt int
	// ToolChainJobs are the toolchain scenario's concurrent jobs (the
	// batch is made that large), ordinary in shape, and ToolChainRounds
	// the bursts of each tool arrangement. Default to 32 and 2.
	ToolChainJobs, ToolChainRounds int
	// Progress receives a line as each scenario starts. Defaults to
	// io.Discard.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c QueueConfig) WithDefaults() QueueConfig {
	if len(c.Scenarios) == 0 {
		c.Scenarios = Scenarios()
	}
	if c.Scale == 0 {
		c.Scale = 1
	}
	setI := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setI(&c.PromptTokens, 38)
	setI(&c.MaxTokens, 96)
	setI(&c.FairFirst, 200)
	setI(&c.FairLate, 20)
	setD(&c.FairDelay, 3*time.Second)
	setI(&c.FairMaxRunning, max(4, 3*c.n(c.FairLate)/4&^1))
	if c.FairWeight == 0 {
		c.FairWeight = 1
	}
	setI(&c.Backlog, 150)
	setI(&c.Probes, 10)
	setD(&c.ProbeGap, 300*time.Millisecond)
	setI(&c.PressureBlocks, 21)
	setI(&c.PressureJobs, 30)
	setI(&c.LowLatencyJobs, 4)
	setI(&c.MixJobs, 40)
	setI(&c.MidPrompt, 256)
	setI(&c.LongPrompt, 1024)
	setI(&c.EvictLong, 20)
	setI(&c.EvictShort, 100)
	setI(&c.EvictLongTokens, 512)
	setI(&c.SerialSample, 3)
	setI(&c.SharedJobs, 50)
	setI(&c.SystemTokens, 400)
	setI(&c.Decoders, 8)
	setI(&c.DecodeTokens, 128)
	setI(&c.HugePrompt, 1491)
	setI(&c.ToolChainJobs, 32)
	setI(&c.ToolChainRounds, 2)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c QueueConfig) validate() error {
	if c.Stack == nil {
		return fmt.Errorf("bench: QueueConfig.Stack is nil: give a function that starts a dev stack")
	}
	if c.Scale <= 0 {
		return fmt.Errorf("bench: queue scale %v: want more than 0", c.Scale)
	}
	if !(c.FairWeight > 0) || math.IsInf(c.FairWeight, 1) {
		return fmt.Errorf("bench: fairness weight %v: want a positive number", c.FairWeight)
	}
	for _, s := range c.Scenarios {
		if part, ok := strings.CutPrefix(s, "seed:"); ok && contains(SeedParts(), part) {
			continue
		}
		if !contains(Scenarios(), s) {
			return fmt.Errorf("bench: queue scenario %q: want one of %s, or seed:<part> with a part of %s", s, strings.Join(Scenarios(), ", "), strings.Join(SeedParts(), ", "))
		}
	}
	return nil
}

// n scales a job count, keeping at least one job.
func (c QueueConfig) n(jobs int) int { return max(1, int(float64(jobs)*c.Scale+0.5)) }

// QueueResults are the measurements of Queue, one field per scenario run
// (nil when not run). Times are in milliseconds unless named otherwise.
type QueueResults struct {
	Model    string           `json:"model"`
	Fairness []FairnessResult `json:"fairness,omitempty"`
	Priority *PriorityResult  `json:"priority,omitempty"`
	Pressure *PressureResult  `json:"pressure,omitempty"`
	Seed     *SeedResult      `json:"seed,omitempty"`
	// ToolChain is the toolchain scenario.
	ToolChain *ToolChainResult `json:"toolchain,omitempty"`
}

// WriteJSON writes r as one indented JSON document.
func (r *QueueResults) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// Queue runs the queue scenarios, each on a stack of its own from
// cfg.Stack, through NATS: the tenants submit with producer.Client and
// the stack's worker serves. It writes the report to w scenario by
// scenario (nil: none) and returns the figures, computed from the jobs'
// usage records (contracts.Usage).
func Queue(ctx context.Context, cfg QueueConfig, w io.Writer) (*QueueResults, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if w == nil {
		w = io.Discard
	}
	res := &QueueResults{}
	for _, name := range cfg.Scenarios {
		fmt.Fprintf(cfg.Progress, "queue scenario %s ...\n", name)
		o := StackOpts{Metrics: sched.NewMetrics()}
		switch name {
		case "pressure":
			o.KVBlocks = cfg.PressureBlocks
		case "fairness":
			o.MaxRunning = max(cfg.FairMaxRunning, 0)
			if cfg.FairWeight != 1 {
				o.TenantWeights = map[string]float64{"tenant-b": cfg.FairWeight}
			}
		case "toolchain":
			o.MaxRunning = cfg.n(cfg.ToolChainJobs)
		}
		metrics := o.Metrics
		st, err := cfg.Stack(ctx, o)
		if err != nil {
			return nil, err
		}
		q := &queueRun{ctx: ctx, cfg: cfg, st: st, metrics: metrics, model: st.Models().Names()[0], r: rand.New(rand.NewPCG(7, 7)), w: w}
		res.Model = q.model
		err = q.run(name, res)
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		serr := st.Stop(sctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bench: queue scenario %s: %w", name, err)
		}
		if serr != nil {
			return nil, serr
		}
	}
	return res, nil
}

// queueRun is one scenario's stack and what its parts share.
type queueRun struct {
	ctx     context.Context
	cfg     QueueConfig
	st      *devstack.Stack
	metrics *sched.Metrics
	model   string
	r       *rand.Rand
	w       io.Writer

	mu      sync.Mutex
	clients map[string]*producer.Client
	// overhead is the prompt tokens of the chat template around the words.
	overhead map[bool]int
}

func (q *queueRun) run(name string, res *QueueResults) (err error) {
	defer q.closeClients()
	switch name {
	case "fairness":
		res.Fairness, err = q.fairness()
	case "priority":
		res.Priority, err = q.priority()
	case "pressure":
		res.Pressure, err = q.pressure()
	case "seed":
		res.Seed, err = q.seed()
	case "toolchain":
		res.ToolChain, err = q.toolChain()
	default:
		part, _ := strings.CutPrefix(name, "seed:")
		res.Seed, err = q.seed(part)
	}
	return err
}

// client is the producer of tenant.
func (q *queueRun) client(tenant string) (*producer.Client, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.clients[tenant]; c != nil {
		return c, nil
	}
	c, err := producer.New(q.st.Conn(), producer.Config{Tenant: tenant, Models: q.st.Models().Paths()})
	if err != nil {
		return nil, err
	}
	if q.clients == nil {
		q.clients = map[string]*producer.Client{}
	}
	q.clients[tenant] = c
	return c, nil
}

func (q *queueRun) closeClients() {
	for _, c := range q.clients {
		c.Close()
	}
}

// words is n random one-letter words: one token each in the generated
// model's tokenizer (and close to it in others), and different per job so
// that the prefix cache shares nothing but what a scenario means to share.
func (q *queueRun) words(n int) string {
	b := make([]byte, 0, 2*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, byte('a'+q.r.IntN(26)))
	}
	return string(b)
}

// job is a job of about tokens prompt tokens (the template included) and
// maxTokens, with system prepended when not empty.
func (q *queueRun) job(c *producer.Client, system string, tokens, maxTokens int, p contracts.Priority) (*contracts.JobRequest, error) {
	req := &contracts.JobRequest{Model: q.model, System: system, MaxTokens: maxTokens, Priority: p}
	sys := system != ""
	q.mu.Lock()
	over, ok := q.overhead[sys]
	q.mu.Unlock()
	if !ok {
		req.Messages = []contracts.Message{{Role: contracts.RoleUser, Content: q.words(20)}}
		n, err := c.PromptTokens(req)
		if err != nil {
			return nil, err
		}
		over = n - 20
		q.mu.Lock()
		if q.overhead == nil {
			q.overhead = map[bool]int{}
		}
		q.overhead[sys] = over
		q.mu.Unlock()
	}
	req.Messages = []contracts.Message{{Role: contracts.RoleUser, Content: q.words(max(1, tokens-over))}}
	return req, nil
}

// done is a finished job: who submitted it, when, and its usage.
type done struct {
	Tenant    string
	Submitted time.Time
	Usage     contracts.Usage
}

// admitted is when the worker admitted the job: its submission plus its
// queue time.
func (d done) admitted() time.Time { return d.Usage.CreatedAt.Add(ms(d.Usage.QueueMs)) }

// fromSubmit is the time from submission to the first token, in ms.
func (d done) fromSubmit() float64 { return d.Usage.QueueMs + d.Usage.TimeToFirstTokenMs }

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// pending is a submitted job whose result is awaited.
type pending struct {
	tenant string
	id     string
	at     time.Time
	res    chan waited
}

type waited struct {
	d   done
	err error
}

// submit submits req as c's tenant and waits for its result in the
// background.
func (q *queueRun) submit(c *producer.Client, req *contracts.JobRequest) (*pending, error) {
	at := time.Now()
	id, err := c.Submit(q.ctx, req, nil)
	if err != nil {
		return nil, err
	}
	p := &pending{tenant: c.Tenant(), id: id, at: at, res: make(chan waited, 1)}
	go func() {
		r, err := c.Wait(q.ctx, id)
		switch {
		case err != nil:
		case r.Usage == nil && r.Status == contracts.StatusCanceled:
			// Canceled before it started (a backlog canceled while
			// still queued): nothing ran, nothing to measure.
			p.res <- waited{d: done{Tenant: c.Tenant(), Submitted: at, Usage: contracts.Usage{JobID: id, Status: r.Status}}}
			return
		case r.Usage == nil:
			err = fmt.Errorf("job %s ended %s without usage", id, r.Status)
		}
		if err != nil {
			p.res <- waited{err: err}
			return
		}
		p.res <- waited{d: done{Tenant: c.Tenant(), Submitted: at, Usage: *r.Usage}}
	}()
	return p, nil
}

// collect waits for every job; a job that did not complete is an error
// unless allowCancelled.
func collect(ps []*pending, allowCancelled bool) ([]done, error) {
	var out []done
	var firstErr error
	for _, p := range ps {
		r := <-p.res
		switch {
		case r.err != nil:
			firstErr = cmpErr(firstErr, r.err)
		case r.d.Usage.Status != contracts.StatusCompleted && !(allowCancelled && r.d.Usage.Status == contracts.StatusCanceled):
			firstErr = cmpErr(firstErr, fmt.Errorf("job %s ended %s", p.id, r.d.Usage.Status))
		default:
			out = append(out, r.d)
		}
	}
	return out, firstErr
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// burst submits reqs from four goroutines as c's tenant, in order.
func (q *queueRun) burst(c *producer.Client, reqs []*contracts.JobRequest) ([]*pending, error) {
	ps := make([]*pending, len(reqs))
	if err := fanOut(len(reqs), func(i int) (err error) {
		ps[i], err = q.submit(c, reqs[i])
		return err
	}); err != nil {
		return nil, err
	}
	return ps, nil
}

// serve submits reqs as a burst and waits for all of them to complete.
func (q *queueRun) serve(c *producer.Client, reqs []*contracts.JobRequest) ([]done, error) {
	ps, err := q.burst(c, reqs)
	if err != nil {
		return nil, err
	}
	return collect(ps, false)
}

// jobs makes n jobs of one shape.
func (q *queueRun) jobs(c *producer.Client, n, tokens, maxTokens int, p contracts.Priority) ([]*contracts.JobRequest, error) {
	reqs := make([]*contracts.JobRequest, n)
	for i := range reqs {
		var err error
		if reqs[i], err = q.job(c, "", tokens, maxTokens, p); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// alone runs reqs one at a time.
func (q *queueRun) alone(c *producer.Client, reqs []*contracts.JobRequest) ([]done, error) {
	var out []done
	for _, req := range reqs {
		p, err := q.submit(c, req)
		if err != nil {
			return nil, err
		}
		d, err := collect([]*pending{p}, false)
		if err != nil {
			return nil, err
		}
		out = append(out, d...)
	}
	return out, nil
}

// Dist is a distribution's summary, in milliseconds.
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func dist(v []float64) Dist {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return Dist{}
	}
	return Dist{N: len(s), P50: percentile(s, 0.5), P99: percentile(s, 0.99), Max: s[len(s)-1]}
}

func (d Dist) String() string {
	return fmt.Sprintf("p50 %.0f  p99 %.0f  max %.0f ms (%d jobs)", d.P50, d.P99, d.Max, d.N)
}

// of maps the jobs through f.
func of(ds []done, f func(done) float64) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = f(d)
	}
	return out
}

// Totals sums the usage of a set of jobs.
type Totals struct {
	Jobs             int `json:"jobs"`
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CachedTokens     int `json:"cached_input_tokens"`
	Preemptions      int `json:"preemptions"`
	RecomputedTokens int `json:"recomputed_tokens"`
	// Seconds is the first submission to the last finish.
	Seconds float64 `json:"seconds"`
}

func totals(ds []done) Totals {
	t := Totals{Jobs: len(ds)}
	var first, last time.Time
	for _, d := range ds {
		u := d.Usage
		t.InputTokens += u.InputTokens
		t.OutputTokens += u.OutputTokens
		t.CachedTokens += u.CachedInputTokens
		t.Preemptions += u.Preemptions
		t.RecomputedTokens += u.RecomputedTokens
		if first.IsZero() || d.Submitted.Before(first) {
			first = d.Submitted
		}
		if u.FinishedAt.After(last) {
			last = u.FinishedAt
		}
	}
	if !first.IsZero() {
		t.Seconds = last.Sub(first).Seconds()
	}
	return t
}

// TokensPerS is the output tokens per second from the first submission
// to the last finish.
func (t Totals) TokensPerS() float64 { return ratio(float64(t.OutputTokens), t.Seconds) }

// PerToken is preemptions and recomputed tokens per generated token.
func (t Totals) PerToken() (preempt, recomputed float64) {
	return ratio(float64(t.Preemptions), float64(t.OutputTokens)), ratio(float64(t.RecomputedTokens), float64(t.OutputTokens))
}

func (t Totals) String() string {
	p, r := t.PerToken()
	return fmt.Sprintf("%d jobs, %d tokens out in %.1f s (%.1f tokens/s); %d preemptions (%.4f per token), %d recomputed tokens (%.3f per token)",
		t.Jobs, t.OutputTokens, t.Seconds, t.TokensPerS(), t.Preemptions, p, t.RecomputedTokens, r)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// sleep waits d or until ctx ends.
func (q *queueRun) sleep(d time.Duration) error {
	select {
	case <-q.ctx.Done():
		return q.ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
