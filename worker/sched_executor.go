package worker

import (
	"context"
	"errors"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// ScheduledModel is a model served through a scheduler.
type ScheduledModel struct {
	Name      string
	Loaded    *engine.Loaded
	Scheduler *sched.Scheduler
}

// SchedExecutor runs jobs through each model's scheduler: continuous
// batching, admission by memory, preemption, priorities and fairness. It
// implements Admitter, so the intake pulls only what it can admit.
type SchedExecutor struct {
	models  map[string]*ScheduledModel
	names   []string
	device  string
	buckets contracts.Buckets
}

// NewSchedExecutor returns an executor over the given scheduled models.
// buckets are the prompt-length thresholds the producers use.
func NewSchedExecutor(device string, buckets contracts.Buckets, models ...*ScheduledModel) *SchedExecutor {
	x := &SchedExecutor{models: map[string]*ScheduledModel{}, device: device, buckets: buckets.WithDefaults()}
	for _, m := range models {
		x.models[m.Name] = m
		x.names = append(x.names, m.Name)
	}
	return x
}

// Device names the device jobs run on.
func (x *SchedExecutor) Device() string { return x.device }

// Admits is how many jobs of this priority, bucket and tenant model's
// scheduler would admit now (sched.Scheduler.Room, with the bucket's
// smallest and largest prompts); with model empty (jobs that may be for
// any model), the model with the most room's, and 0 for a model not
// served here.
func (x *SchedExecutor) Admits(model string, p contracts.Priority, b contracts.Bucket, tenant string) int {
	lo, hi := 0, x.buckets.ShortMax
	switch b {
	case contracts.BucketMedium:
		lo, hi = x.buckets.ShortMax, x.buckets.MediumMax
	case contracts.BucketLong:
		lo, hi = x.buckets.MediumMax+1, 1<<30 // capped at the model's context
	}
	if model != "" {
		m, ok := x.models[model]
		if !ok {
			return 0
		}
		return m.Scheduler.Room(p.Rank(), tenant, lo, hi)
	}
	n := 0
	for _, m := range x.models {
		n = max(n, m.Scheduler.Room(p.Rank(), tenant, lo, hi))
	}
	return n
}

// OnCapacity registers f with every model's scheduler
// (sched.Scheduler.OnCapacity): the intake looks again when one may take
// more work.
func (x *SchedExecutor) OnCapacity(f func()) {
	for _, m := range x.models {
		m.Scheduler.OnCapacity(f)
	}
}

// Execute runs the job through its model's scheduler.
func (x *SchedExecutor) Execute(ctx context.Context, job *Job, sink Sink) (*Outcome, error) {
	r := job.Request
	sm, ok := x.models[r.Model]
	if !ok {
		return nil, contracts.NewError(contracts.CodeUnknownModel, "model %q is not served here (served: %v)", r.Model, x.names)
	}
	prio := job.Priority
	if !prio.Valid() {
		prio = r.EffectivePriority()
	}
	opts := sched.JobOpts{Tenant: job.Tenant, Weight: job.Weight, Class: prio.Rank(), OnEvent: func(kind, detail string) { sink.Event(kind, detail) }}
	if r.IsEmbedding() {
		return x.executeEmbedding(ctx, job, sm, opts)
	}
	req, th, err := buildRequest(sm.Loaded, sm.Name, r, sink)
	if err != nil {
		return nil, err
	}
	if r.Temperature != nil {
		opts.Temperature = *r.Temperature
	}
	if m := r.Memory; m != nil {
		opts.LowLatency = m.LowLatency
		opts.NotPreemptible = !r.Preemptible()
		if m.MaxMemoryMB > 0 {
			opts.MaxMemoryMB = float64(m.MaxMemoryMB)
		}
	}
	res, st, err := sm.Scheduler.Generate(ctx, &req, opts)
	if err != nil {
		if errors.Is(err, sched.ErrTooLarge) {
			return nil, contracts.NewError(contracts.CodeMemoryLimit, "%v", err)
		}
		if errors.Is(err, sched.ErrStopped) {
			return nil, contracts.NewError(contracts.CodeWorkerShutdown, "%v", err)
		}
		return nil, engineError(err)
	}
	out := outcomeFrom(res, req.Tools)
	applyToolFailure(out, r, req.Tools)
	th.apply(out)
	out.Usage.Architecture = sm.Loaded.Model.Arch
	u := &out.Usage
	u.CachedInputTokens = st.CachedInputTokens
	u.Preemptions = st.Preemptions
	u.RecomputedTokens = st.RecomputedTokens
	u.DraftedTokens, u.AcceptedDraftTokens = st.DraftedTokens, st.AcceptedDraftTokens
	u.QueueMs = st.QueueMs // the worker adds the time before the scheduler
	return out, nil
}
