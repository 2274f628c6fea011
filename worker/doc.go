// Package worker is the zerolayer worker: it pulls generation jobs from
// NATS JetStream, runs them on a real model, and publishes what they
// produce.
//
// Data flow for one job:
//
//  1. The intake pulls from ZL_JOBS through one durable consumer per
//     priority, prompt-length bucket, tenant and served model
//     (Config.Models; fair.go: made on demand,
//     as stored-job notices and scans of the stream show tenants with jobs
//     waiting), higher priorities first, with every eighth pull starting
//     from the lowest class so low-priority jobs always progress. Within a
//     class it takes the next job of the tenant served the fewest
//     estimated tokens for its weight (Config.TenantWeights), so one
//     tenant's backlog never queues another's jobs behind it. It pulls a
//     tenant's job only while the executor would admit it (Admitter: at
//     most sched.LookAhead new jobs of a class waiting in the scheduler,
//     plus one per tenant up to sched.LookAheadTenants so the scheduler,
//     which shares the batch between tenants by weight, sees every
//     tenant's next job; and a higher class pulled into a full worker when
//     preempting lower work makes room), so a busy worker leaves jobs to
//     idle ones, and one worker's models' jobs never reach another's.
//     Jobs queued by earlier releases on model-less subjects come through
//     a consumer per class and tenant (and the oldest form through the
//     class consumers, one per priority and bucket): a worker runs those
//     of its models and republishes the others on their model's subject
//     (job.go: forward). A class consumer deleted under the worker is recreated from the
//     contract when the worker provisions, else reported missing in the
//     log and the zerolayer_intake_consumer_missing gauge.
//  2. The job is decoded and validated (contracts.DecodeJobRequest). A bad
//     job is answered, never dropped: an error event, a failed result and a
//     DLQ record, then Term.
//  3. The job is named by its tenant and id (from the subject
//     zl.jobs.<priority>.<bucket>.<tenant>.<model>.<job_id>): a job whose result
//     is already stored is acked without running (a resubmission, or a
//     redelivery whose first attempt finished: its usage record is
//     published again, deduplicated); a cancel request stored on
//     zl.cancel.<tenant>.<job_id> (stream ZL_CANCEL) ends it before it runs,
//     and one heard on that subject cancels it while it runs. Only the
//     job's tenant can publish there.
//     A job over its tenant's limits (Config.Quota: requests or tokens per
//     minute by JetStream's stored time, jobs in flight, monthly spend) is
//     refused like a bad one, with rate_limited, concurrency_limited or
//     spend_limit_exceeded, and never runs or bills.
//  4. The Executor runs it (SchedExecutor batches through a scheduler per
//     model; InOrderExecutor runs one job at a time). Tokens stream out as delta events on zl.events.<tenant>.<job_id>,
//     coalesced (Config.DeltaInterval, DeltaTokens: a streaming job's first
//     token at once, then an event per 25 ms or 16 tokens). A job whose system prompt
//     has <tool name="low_latency_mode"/> has memory.low_latency set at
//     decoding and is admitted reserved. A tool failure takes the
//     request's on_tool_failure rung: fail (the job fails), retry_without_tool
//     (the engine drops the tool and generates again), fallback (the
//     job answers its fallback_response, also when a retry without the
//     tool fails again; translate.go); every rung keeps the first failure
//     as tool_failure_reason in the result and the usage.
//  5. The final event, the result (zl.results.<tenant>.<job_id>) and the
//     usage record (zl.usage.<tenant>, Nats-Msg-Id = <tenant>/<job_id>) are published and
//     acknowledged by JetStream, then the job is acked. A crash before the
//     ack means redelivery: the job runs again with attempt+1, and billing
//     stores its usage once.
//
// From its pull to its ack, nak or term, every job message the worker
// holds is kept alive with InProgress once a second (lease.go), waiting or
// running, so the ack wait (contracts.DefaultAckWait, 4 s) can be short: a
// dead worker's jobs run again elsewhere seconds after its last heartbeat,
// and a slow job on a live worker is not redelivered.
//
// Retryable failures Nak with a delay; on Stop, jobs that do not finish in
// time are handed back with Nak for another worker.
//
// How models are served is decided in one place, OpenModels (models.go):
// the backend (gpu/device: cpu, cuda or auto), where model names resolve
// (model/store), the executor (a scheduler per model, or in order), each
// KV arena's size (engine's defaults on the CPU, a share of free device
// memory through gpu.KVSizer on CUDA) and the concurrency the intake
// should use. A command line turns flags into a ModelsConfig; a test
// builds one.
//
//	m, _ := worker.OpenModels(ctx, worker.ModelsConfig{Models: []string{"stories260k"}, ModelDirs: dirs})
//	defer m.Close()
//	w, _ := worker.New(nc, m.Executor(), worker.Config{Concurrency: m.Concurrency(), Provision: true})
//	_ = w.Start(ctx)
//	defer w.Stop(shutdownCtx)
//
// The package and its children (sched, engine, model, sample, tools) may
// import contracts and gpu (gpu/device only here, to open the backend);
// never producer, billing or cmd.
package worker
