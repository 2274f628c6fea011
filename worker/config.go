package worker

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// Config configures a Worker.
type Config struct {
	// ID names the worker in usage records and logs. Defaults to
	// "<hostname>-<pid>".
	ID string
	// Priorities are the classes this worker pulls, in the order it
	// prefers them. Defaults to high, normal, low.
	Priorities []contracts.Priority
	// Buckets are the prompt-length buckets this worker pulls. Defaults to
	// all three.
	Buckets []contracts.Bucket
	// Concurrency is how many jobs the worker holds at once. Defaults to 1.
	Concurrency int
	// Models are the served names of the models this worker pulls jobs
	// for: it binds a consumer per model (and class and tenant), so that
	// it never pulls another model's jobs, and announces them in the
	// ZL_WORKERS bucket. Defaults to the executor's models, when it
	// describes them (ModelDescriber); New fails without either.
	Models []string
	// HeartbeatInterval is how often the worker rewrites its ZL_WORKERS
	// entry (and its models' ZL_MODELS entries); at most a third of
	// contracts.WorkersTTL, after which readers count it gone. Defaults to
	// contracts.WorkerHeartbeat (5 seconds).
	HeartbeatInterval time.Duration
	// Limits bound what a job may ask for. Zero fields take the contract
	// defaults.
	Limits contracts.Limits
	// Streams describes the streams and consumers (AckWait, MaxDeliver).
	// Zero fields take the contract defaults.
	Streams contracts.StreamsConfig
	// Provision creates or updates the streams and consumers at Start, and
	// recreates a consumer deleted while the worker runs. Defaults to false
	// (an operator provisions them; a deleted consumer is reported).
	Provision bool
	// InProgressInterval is how often the lease of every job the worker
	// holds (fetched, waiting, running or publishing) is renewed with
	// InProgress (lease.go); at most a quarter of the shortest ack wait,
	// Streams.AckWait's or that of a consumer the worker pulls from (one
	// provisioned with a shorter ack wait than this worker's
	// configuration). Defaults to 1 second: the same for every ack wait
	// of 4 seconds or more, so that workers of different configurations
	// all keep their jobs.
	InProgressInterval time.Duration
	// RetryDelay is the delay of a Nak after a retryable failure. Defaults
	// to 2 seconds.
	RetryDelay time.Duration
	// IdlePoll is how long the intake waits for a new-job notification
	// before polling the consumers again (redeliveries publish none).
	// Defaults to 500 milliseconds.
	IdlePoll time.Duration
	// AffinityWait is how long a job passed on to the worker holding its
	// prompt's prefix (affinity.go) may wait in that worker's queue
	// before any worker serving its model takes it. Defaults to 1s;
	// negative turns prefix affinity off (the worker neither passes jobs
	// on nor records what it holds; it still empties its own queue and
	// those of workers gone).
	AffinityWait time.Duration
	// ConsumerRecheck is how long the intake waits before it looks up a
	// missing consumer again (one it may not recreate, or failed to), and
	// bounds each lookup. Defaults to 5 seconds.
	ConsumerRecheck time.Duration
	// DeltaTokens bounds how many tokens one delta event carries: a job
	// that did not ask to stream gets one event per DeltaTokens tokens, a
	// streaming job one at least that often (see DeltaInterval). 1
	// publishes every token as it comes. Defaults to 16.
	DeltaTokens int
	// DeltaInterval coalesces a streaming job's delta events: its first
	// token is published at once, then what has come since the last
	// event at most every DeltaInterval (or every DeltaTokens tokens,
	// whichever comes first), a timer publishing a pending delta when no
	// further token comes. Each event costs a publish, a wake-up of the
	// gateway and an SSE write, so a job that decodes in steps of a few
	// milliseconds sends several tokens per event; a reader sees text
	// at most DeltaInterval late. Negative publishes every token at
	// once. Defaults to 25 milliseconds.
	DeltaInterval time.Duration
	// Metrics, if set, records every finished job.
	Metrics *Metrics
	// TenantWeights are the tenants' shares within a class, of the intake
	// (fair.go) and of the scheduler's batch (Job.Weight): a tenant of
	// weight 2 gets twice the tokens of one of weight 1 while both have
	// jobs waiting. Tenants not listed weigh 1.
	TenantWeights map[string]float64
	// Quota, if set, checks each job against its tenant's limits before
	// it runs (quota.go). Defaults to none.
	Quota Quota
	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultDeltaInterval is Config.DeltaInterval's default.
const DefaultDeltaInterval = 25 * time.Millisecond

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if len(c.Priorities) == 0 {
		c.Priorities = contracts.Priorities()
	}
	if len(c.Buckets) == 0 {
		c.Buckets = contracts.AllBuckets()
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = contracts.WorkerHeartbeat
	}
	c.Limits = c.Limits.WithDefaults()
	c.Streams = c.Streams.WithDefaults()
	if c.InProgressInterval == 0 {
		c.InProgressInterval = min(time.Second, c.Streams.AckWait/4)
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 2 * time.Second
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = 500 * time.Millisecond
	}
	if c.ConsumerRecheck == 0 {
		c.ConsumerRecheck = 5 * time.Second
	}
	if c.AffinityWait == 0 {
		c.AffinityWait = time.Second
	}
	if c.DeltaTokens == 0 {
		c.DeltaTokens = 16
	}
	if c.DeltaInterval == 0 {
		c.DeltaInterval = DefaultDeltaInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	for _, p := range c.Priorities {
		if !p.Valid() {
			return fmt.Errorf("worker: priority %q: want one of %v", p, contracts.Priorities())
		}
	}
	for _, b := range c.Buckets {
		if !b.Valid() {
			return fmt.Errorf("worker: bucket %q: want one of %v", b, contracts.AllBuckets())
		}
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("worker: concurrency %d: must be at least 1", c.Concurrency)
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("worker: no model to pull jobs for: set Config.Models, or use an executor that describes its models (ModelDescriber)")
	}
	for i, m := range c.Models {
		if m == "" || slices.Contains(c.Models[:i], m) {
			return fmt.Errorf("worker: model %q in Config.Models: want distinct, non-empty served names", m)
		}
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval > contracts.WorkersTTL/3 {
		return fmt.Errorf("worker: heartbeat interval %v: want a positive interval of at most %v (a third of contracts.WorkersTTL)", c.HeartbeatInterval, contracts.WorkersTTL/3)
	}
	for t, wt := range c.TenantWeights {
		if !(wt > 0) || math.IsInf(wt, 0) {
			return fmt.Errorf("worker: tenant %s: weight %v must be positive", t, wt)
		}
	}
	if c.ConsumerRecheck < 0 {
		return fmt.Errorf("worker: consumer recheck %v is negative", c.ConsumerRecheck)
	}
	if c.DeltaTokens < 1 {
		return fmt.Errorf("worker: delta tokens %d: must be at least 1 (1 publishes every token)", c.DeltaTokens)
	}
	if c.InProgressInterval <= 0 {
		return fmt.Errorf("worker: in-progress interval %v must be positive (leave it zero for the default)", c.InProgressInterval)
	}
	if c.InProgressInterval >= c.Streams.AckWait {
		return fmt.Errorf("worker: in-progress interval %v must be shorter than the ack wait %v", c.InProgressInterval, c.Streams.AckWait)
	}
	return nil
}

// weight returns tenant's intake weight.
func (c Config) weight(tenant string) float64 {
	if w, ok := c.TenantWeights[tenant]; ok {
		return w
	}
	return 1
}
