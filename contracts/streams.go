package contracts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names.
const (
	// StreamJobs is the intake: work-queue retention, at most one message
	// per subject (which carries tenant and job id, so a queued job cannot
	// be stored twice), messages expire after the job TTL.
	StreamJobs = "ZL_JOBS"
	// StreamEvents holds each job's events for late subscribers.
	StreamEvents = "ZL_EVENTS"
	// StreamResults holds the last result of each job.
	StreamResults = "ZL_RESULTS"
	// StreamUsage holds usage records until billing has stored them.
	StreamUsage = "ZL_USAGE"
	// StreamDLQ holds dead-lettered jobs with the reason.
	StreamDLQ = "ZL_DLQ"
	// StreamCancel holds cancel requests, zl.cancel.<tenant>.<job_id>,
	// one per subject, for the job TTL. A worker looks a job's up before
	// running it (so a job canceled while queued never runs) and
	// subscribes to the subjects to stop jobs it is running. The tenant in
	// the subject is the canceler: a tenant can publish only on its own
	// subjects, so it can cancel only its own jobs. It replaces the
	// ZL_CANCEL key-value bucket of earlier releases (KV_ZL_CANCEL), which
	// any user of the bucket could write for any job and roll up whole.
	StreamCancel = "ZL_CANCEL"
)

// ConsumerName returns the durable name of the class consumer for one
// priority and bucket: jobs-<priority>-<bucket>. It serves the jobs queued
// in the old subject form (JobsFilter).
func ConsumerName(p Priority, b Bucket) string {
	return "jobs-" + string(p) + "-" + string(b)
}

// TenantConsumerName returns the durable name of the pull consumer of one
// priority, bucket and tenant: jobs-<priority>-<bucket>-<tenant>.
func TenantConsumerName(p Priority, b Bucket, tenant string) string {
	return ConsumerName(p, b) + "-" + tenant
}

// ModelConsumerName returns the durable name of the pull consumer of one
// priority, bucket, tenant and model:
// jobs-<priority>-<bucket>-<tenant>~<model>, model being ModelToken(model)
// ('~' is in neither a tenant nor a model token, so no two consumers share
// a name).
func ModelConsumerName(p Priority, b Bucket, tenant, model string) string {
	return TenantConsumerName(p, b, tenant) + "~" + ModelToken(model)
}

// TenantConsumerInactive is how long a class-and-tenant consumer lives
// without a pull before JetStream removes it; workers recreate it when the
// tenant has jobs again (its jobs stay in the stream meanwhile).
const TenantConsumerInactive = time.Hour

// MinDuplicateWindow is the shortest ZL_JOBS duplicate window the contract
// allows: a client retrying a submission within it is deduplicated.
const MinDuplicateWindow = 10 * time.Minute

// MinResultsMaxAge is the shortest time results are kept.
const MinResultsMaxAge = 7 * 24 * time.Hour

// DefaultAckWait is StreamsConfig.AckWait's default: a dead worker's jobs
// run again elsewhere about this long after its last heartbeat (plus the
// survivors' poll, half a second), while a live worker's heartbeats, one a
// second, may be three seconds late before a job of its is redelivered.
// Releases before it used 30 seconds.
const DefaultAckWait = 4 * time.Second

// StreamsConfig configures EnsureStreams. The zero value is the development
// setup; production sets Replicas to 3.
type StreamsConfig struct {
	// Replicas is the replication factor of every stream, of the durable
	// consumers on ZL_JOBS (the nine class consumers and the tenants'
	// consumers workers make) and of the tenant-limits bucket: 1 for a
	// single server (development, `zerolayer dev`), 3 for a production
	// cluster of three or five nodes. Defaults to 1.
	//
	// Placement: each stream, and each durable consumer with its acks
	// and redelivery counts, is a Raft group on Replicas nodes, one of
	// them its leader; JetStream spreads the groups over the nodes. The
	// gateway's batch buckets take gateway.Config.Replicas, which should
	// match. Consumers the clients make for a moment (the ordered
	// consumers that read events and results) are R1 on one node and are
	// remade by their clients when it goes.
	//
	// With R3 the loss of one node loses nothing: the groups it led elect
	// a new leader among the other two within seconds, during which a
	// publish to such a stream times out (a client retries it under the
	// same Nats-Msg-Id, which deduplicates) and workers' pulls wait; a
	// job whose ack was lost is redelivered and its second usage record
	// is dropped as a duplicate (Nats-Msg-Id <tenant>/<job_id>). A node
	// that comes back catches up from the others. The loss of two of
	// three stops the streams (no quorum: writes refused, nothing lost)
	// until one returns. EnsureStreams with Replicas 3 needs three nodes
	// online, and a process that runs it with another count moves the
	// streams to that count: give every provisioning process the same.
	Replicas int
	// Storage is where streams keep their messages. Defaults to
	// jetstream.FileStorage.
	Storage jetstream.StorageType
	// JobTTL is ZL_JOBS's MaxAge: a job not taken within it is dropped,
	// and cancel markers live as long. Defaults to 24 hours.
	JobTTL time.Duration
	// DuplicateWindow is the Nats-Msg-Id dedupe window of ZL_JOBS,
	// ZL_RESULTS and ZL_USAGE; at least MinDuplicateWindow and at most
	// JobTTL. Defaults to 15 minutes.
	DuplicateWindow time.Duration
	// EventsMaxAge is how long events are kept for late subscribers.
	// Defaults to 1 hour.
	EventsMaxAge time.Duration
	// ResultsMaxAge is how long results are kept; at least
	// MinResultsMaxAge. Defaults to 30 days.
	ResultsMaxAge time.Duration
	// UsageMaxAge is how long usage records are kept after billing acked
	// them (they are the audit trail of the billing ingest). Defaults to
	// 400 days.
	UsageMaxAge time.Duration
	// DLQMaxAge is how long dead-lettered jobs are kept. Defaults to 30
	// days.
	DLQMaxAge time.Duration
	// AckWait is how long a worker may hold a job without acking or
	// sending InProgress before JetStream redelivers it: how long the jobs
	// of a worker that died (kill -9, a lost node) wait before another
	// worker runs them. Workers keep every job they hold alive with
	// InProgress once a second (worker.Config.InProgressInterval), so a
	// slow job on a live worker is not redelivered whatever it lasts; a
	// worker silent for longer than AckWait (stalled, or cut off from
	// NATS) may see its jobs run again elsewhere, billed once. Every
	// process that provisions should use the same value: the last one to
	// run EnsureStreams sets it. Defaults to DefaultAckWait.
	AckWait time.Duration
	// MaxDeliver is how many times a job is delivered before JetStream
	// gives up on it (the worker then dead-letters it). Defaults to 5.
	MaxDeliver int
	// BackOff, when set, replaces AckWait for successive redeliveries
	// after an ack timeout (not after a Nak); at most MaxDeliver entries.
	// Defaults to none: every redelivery waits AckWait.
	BackOff []time.Duration
	// MaxAckPending caps the jobs of one consumer held unacked by all
	// workers together. Defaults to 1,000.
	MaxAckPending int
	// JobsMaxMsgs and JobsMaxBytes cap the jobs ZL_JOBS holds queued: at
	// the cap a submit is refused with CodeOverloaded (the workers are
	// behind) instead of the queue growing without bound. Defaults to 0:
	// no cap but the server's storage (whose exhaustion is refused the
	// same way).
	JobsMaxMsgs  int64
	JobsMaxBytes int64
}

// WithDefaults returns c with every zero field set to its default.
func (c StreamsConfig) WithDefaults() StreamsConfig {
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setI := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setI(&c.Replicas, 1)
	setD(&c.JobTTL, 24*time.Hour)
	setD(&c.DuplicateWindow, 15*time.Minute)
	setD(&c.EventsMaxAge, time.Hour)
	setD(&c.ResultsMaxAge, 30*24*time.Hour)
	setD(&c.UsageMaxAge, 400*24*time.Hour)
	setD(&c.DLQMaxAge, 30*24*time.Hour)
	setD(&c.AckWait, DefaultAckWait)
	setI(&c.MaxDeliver, 5)
	setI(&c.MaxAckPending, 1000)
	return c
}

// Validate reports a configuration the contract does not allow, saying how
// to fix it.
func (c StreamsConfig) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("contracts: Replicas %d is outside [1, 5]; use 1 for a single server and 3 for a cluster", c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("contracts: Storage %v is neither file nor memory", c.Storage)
	case c.DuplicateWindow < MinDuplicateWindow:
		return fmt.Errorf("contracts: DuplicateWindow %v is below the contract's minimum of %v", c.DuplicateWindow, MinDuplicateWindow)
	case c.JobTTL < c.DuplicateWindow:
		return fmt.Errorf("contracts: JobTTL %v is shorter than DuplicateWindow %v; raise JobTTL", c.JobTTL, c.DuplicateWindow)
	case c.ResultsMaxAge < MinResultsMaxAge:
		return fmt.Errorf("contracts: ResultsMaxAge %v is below the contract's minimum of %v", c.ResultsMaxAge, MinResultsMaxAge)
	case c.UsageMaxAge < c.DuplicateWindow:
		return fmt.Errorf("contracts: UsageMaxAge %v is shorter than DuplicateWindow %v", c.UsageMaxAge, c.DuplicateWindow)
	case c.EventsMaxAge < time.Second || c.DLQMaxAge < time.Second:
		return fmt.Errorf("contracts: EventsMaxAge %v and DLQMaxAge %v must be at least a second", c.EventsMaxAge, c.DLQMaxAge)
	case c.AckWait < time.Second:
		return fmt.Errorf("contracts: AckWait %v is below a second; workers send InProgress before it ends", c.AckWait)
	case c.MaxDeliver < 1:
		return fmt.Errorf("contracts: MaxDeliver %d must be at least 1", c.MaxDeliver)
	case len(c.BackOff) > c.MaxDeliver:
		return fmt.Errorf("contracts: BackOff has %d entries, more than MaxDeliver %d", len(c.BackOff), c.MaxDeliver)
	case c.MaxAckPending < 1:
		return fmt.Errorf("contracts: MaxAckPending %d must be at least 1", c.MaxAckPending)
	}
	for i, d := range c.BackOff {
		if d < time.Second {
			return fmt.Errorf("contracts: BackOff[%d] %v is below a second", i, d)
		}
	}
	return nil
}

// StreamConfigs returns the configuration of every stream, in the order
// EnsureStreams applies them. c must already have its defaults.
func (c StreamsConfig) StreamConfigs() []jetstream.StreamConfig {
	base := func(name, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			MaxMsgs:     -1,
			MaxBytes:    -1,
			Metadata:    map[string]string{"zl_contract": ContractVersion},
		}
	}
	jobs := base(StreamJobs, "zerolayer job intake: zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>", JobsSubjects()...)
	jobs.Retention = jetstream.WorkQueuePolicy
	jobs.MaxAge = c.JobTTL
	jobs.Duplicates = c.DuplicateWindow
	// One message per subject, and a full stream refuses new jobs rather
	// than dropping queued ones: a job resubmitted while queued is refused
	// (IsDuplicateJob) whatever headers its publisher set.
	jobs.MaxMsgsPerSubject = 1
	jobs.Discard = jetstream.DiscardNew
	jobs.DiscardNewPerSubject = true
	if c.JobsMaxMsgs > 0 {
		jobs.MaxMsgs = c.JobsMaxMsgs
	}
	if c.JobsMaxBytes > 0 {
		jobs.MaxBytes = c.JobsMaxBytes
	}
	// Once a job is stored, its headers alone go out on
	// zl.stored.jobs.<priority>.<bucket>.<tenant>.<job_id>: a worker woken by it
	// finds the job in the stream (a subscriber to the publish subject
	// itself can hear of a job before the stream holds it) and gets no
	// second copy of the payload.
	jobs.RePublish = &jetstream.RePublish{Source: SubjectJobsPrefix + ">", Destination: SubjectStoredJobsAll, HeadersOnly: true}

	events := base(StreamEvents, "zerolayer job events: zl.events.<tenant>.<job_id>", SubjectEventsAll)
	events.MaxAge = c.EventsMaxAge
	events.Duplicates = min(2*time.Minute, c.EventsMaxAge)
	events.AllowDirect = true

	results := base(StreamResults, "zerolayer final results: zl.results.<tenant>.<job_id>", SubjectResultsAll)
	results.MaxAge = c.ResultsMaxAge
	results.MaxMsgsPerSubject = 1
	results.Duplicates = c.DuplicateWindow
	results.AllowDirect = true

	usage := base(StreamUsage, "zerolayer usage records: zl.usage.<tenant>", SubjectUsageAll)
	usage.MaxAge = c.UsageMaxAge
	usage.Duplicates = c.DuplicateWindow

	dlq := base(StreamDLQ, "zerolayer dead-lettered jobs: zl.dlq.<priority>.<bucket>.<tenant>", SubjectDLQAll)
	dlq.MaxAge = c.DLQMaxAge
	dlq.Duplicates = min(2*time.Minute, c.DLQMaxAge)

	cancels := base(StreamCancel, "zerolayer cancel requests: zl.cancel.<tenant>.<job_id>", SubjectCancelAll)
	cancels.MaxAge = c.JobTTL
	cancels.MaxMsgsPerSubject = 1
	cancels.Duplicates = min(2*time.Minute, c.JobTTL)
	cancels.AllowDirect = true

	return []jetstream.StreamConfig{jobs, events, results, usage, dlq, cancels}
}

// ConsumerConfigs returns the durable pull consumers on ZL_JOBS, one per
// priority and bucket, highest priority and shortest bucket first. Their
// filters partition the stream, as a work-queue stream requires. c must
// already have its defaults.
func (c StreamsConfig) ConsumerConfigs() []jetstream.ConsumerConfig {
	var out []jetstream.ConsumerConfig
	for _, p := range Priorities() {
		for _, b := range AllBuckets() {
			out = append(out, c.ConsumerConfig(p, b))
		}
	}
	return out
}

// ConsumerConfig returns the durable pull consumer on ZL_JOBS of one
// priority and bucket, as EnsureStreams makes it; a worker recreates a
// lost consumer from it. c must already have its defaults.
func (c StreamsConfig) ConsumerConfig(p Priority, b Bucket) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName(p, b),
		Description:   fmt.Sprintf("zerolayer workers pulling %s-priority %s jobs", p, b),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver,
		BackOff:       c.BackOff,
		FilterSubject: JobsFilter(p, b),
		MaxAckPending: c.MaxAckPending,
		Replicas:      c.Replicas,
	}
}

// TenantConsumerConfig returns the durable pull consumer on ZL_JOBS of one
// priority, bucket and tenant, which workers create when they learn the
// tenant has jobs of that class (a stored-job notice, or the stream's
// subjects). It is removed after TenantConsumerInactive without pulls. c
// must already have its defaults.
func (c StreamsConfig) TenantConsumerConfig(p Priority, b Bucket, tenant string) jetstream.ConsumerConfig {
	cc := c.ConsumerConfig(p, b)
	cc.Durable = TenantConsumerName(p, b, tenant)
	cc.Description = fmt.Sprintf("zerolayer workers pulling %s-priority %s jobs of %s", p, b, tenant)
	cc.FilterSubject = TenantJobsFilter(p, b, tenant)
	cc.InactiveThreshold = TenantConsumerInactive
	return cc
}

// ModelConsumerConfig returns the durable pull consumer on ZL_JOBS of one
// priority, bucket, tenant and model (filter ModelJobsFilter), which the
// workers serving the model create when they learn the tenant has jobs of
// that class for it; workers of other models never pull from it. It is
// removed after TenantConsumerInactive without pulls. c must already have
// its defaults.
func (c StreamsConfig) ModelConsumerConfig(p Priority, b Bucket, tenant, model string) jetstream.ConsumerConfig {
	cc := c.TenantConsumerConfig(p, b, tenant)
	cc.Durable = ModelConsumerName(p, b, tenant, model)
	cc.Description = fmt.Sprintf("zerolayer workers pulling %s-priority %s jobs of %s for %s", p, b, tenant, model)
	cc.FilterSubject = ModelJobsFilter(p, b, tenant, model)
	return cc
}

// EnsureStreams creates or updates the six streams, the nine durable pull
// consumers on ZL_JOBS and the key-value buckets of tenant limits
// (TenantLimitsBucket) and of the fleet (WorkersBucket, ModelsBucket), so
// that they match cfg (zero fields take their
// defaults), and brings the class-and-tenant (and model) consumers that exist to cfg's
// ack wait, deliveries, back-off, pending cap and replicas (workers make
// them on demand and take one that exists as it is, so that a worker of
// another configuration does not rewrite them: a new setting reaches them
// here). It is idempotent: running it again, from any number of
// processes, converges on the same state. It does not delete streams or
// consumers it does not know (the ZL_CANCEL key-value bucket of older
// releases is left for an operator to remove).
//
// A ZL_JOBS of an older release is updated in place to JobsSubjects: its
// messages stay, and those on a known priority and bucket are served as
// before. While it still holds jobs of the old form
// (zl.jobs.<priority>.<bucket>.<tenant>, many per subject), the limit of
// one message per subject is not applied, since applying it would drop
// all but the last queued job of each tenant; the next EnsureStreams after
// they have drained applies it. Changing a setting JetStream cannot update
// in place (such as a stream's retention or storage) fails with the
// server's error.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamsConfig) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, sc := range cfg.StreamConfigs() {
		if sc.Name == StreamJobs {
			legacy, err := legacyJobs(ctx, js)
			if err != nil {
				return err
			}
			if legacy {
				sc.MaxMsgsPerSubject, sc.DiscardNewPerSubject = -1, false
			}
		}
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("contracts: ensure stream %s: %w", sc.Name, err)
		}
	}
	for _, cc := range cfg.ConsumerConfigs() {
		if _, err := js.CreateOrUpdateConsumer(ctx, StreamJobs, cc); err != nil {
			return fmt.Errorf("contracts: ensure consumer %s on %s: %w", cc.Durable, StreamJobs, err)
		}
	}
	if err := ensureTenantConsumers(ctx, js, cfg); err != nil {
		return err
	}
	for _, kc := range []jetstream.KeyValueConfig{cfg.TenantLimitsBucketConfig(), cfg.WorkersBucketConfig(), cfg.ModelsBucketConfig(), cfg.PrefixesBucketConfig()} {
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return fmt.Errorf("contracts: ensure key-value bucket %s: %w", kc.Bucket, err)
		}
	}
	return nil
}

// legacyJobs reports whether ZL_JOBS exists and holds jobs of the old
// subject form, which a limit of one message per subject would drop.
func legacyJobs(ctx context.Context, js jetstream.JetStream) (bool, error) {
	s, err := js.Stream(ctx, StreamJobs)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("contracts: look up %s: %w", StreamJobs, err)
	}
	if s.CachedInfo().Config.MaxMsgsPerSubject == 1 {
		return false, nil // already in the current form
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(LegacyJobsAll))
	if err != nil {
		return false, fmt.Errorf("contracts: look up %s: %w", StreamJobs, err)
	}
	return len(info.State.Subjects) > 0, nil
}

// ensureTenantConsumers updates the class-and-tenant consumers on ZL_JOBS
// whose settings from cfg differ (TenantConsumerConfig): an ack wait, a
// delivery count, a back-off, a pending cap or a replica count set by an
// earlier release or configuration.
func ensureTenantConsumers(ctx context.Context, js jetstream.JetStream, cfg StreamsConfig) error {
	s, err := js.Stream(ctx, StreamJobs)
	if err != nil {
		return fmt.Errorf("contracts: look up %s: %w", StreamJobs, err)
	}
	var stale []jetstream.ConsumerConfig
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		p, b, tenant, ok := parseTenantConsumerName(ci.Name)
		if !ok {
			continue
		}
		want := cfg.TenantConsumerConfig(p, b, tenant)
		if strings.Contains(ci.Name, "~") {
			// A model's consumer: the model's name is not in its
			// consumer's name (only its token): keep the filter.
			want.Durable, want.Description, want.FilterSubject = ci.Name, ci.Config.Description, ci.Config.FilterSubject
		}
		if !sameSettings(ci.Config, want) {
			stale = append(stale, want)
		}
	}
	if err := list.Err(); err != nil {
		return fmt.Errorf("contracts: list the consumers of %s: %w", StreamJobs, err)
	}
	for _, cc := range stale {
		// (One removed meanwhile, for inactivity, stays removed.)
		_, err := js.UpdateConsumer(ctx, StreamJobs, cc)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerDoesNotExist) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("contracts: update consumer %s on %s: %w", cc.Durable, StreamJobs, err)
		}
	}
	return nil
}

// parseTenantConsumerName is TenantConsumerName's inverse, and takes the
// class and tenant of a ModelConsumerName too; ok is false for a name of
// another form.
func parseTenantConsumerName(name string) (p Priority, b Bucket, tenant string, ok bool) {
	if i := strings.IndexByte(name, '~'); i >= 0 {
		if modelTokenProblem(name[i+1:]) != "" {
			return "", "", "", false
		}
		name = name[:i]
	}
	for _, p := range Priorities() {
		for _, b := range AllBuckets() {
			if t, found := strings.CutPrefix(name, ConsumerName(p, b)+"-"); found && ValidateTenant(t) == nil {
				return p, b, t, true
			}
		}
	}
	return "", "", "", false
}

// sameSettings reports whether a consumer has the settings that
// StreamsConfig gives want.
func sameSettings(have, want jetstream.ConsumerConfig) bool {
	return have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver && slices.Equal(have.BackOff, want.BackOff) &&
		have.MaxAckPending == want.MaxAckPending && max(have.Replicas, 1) == max(want.Replicas, 1) &&
		have.InactiveThreshold == want.InactiveThreshold
}
