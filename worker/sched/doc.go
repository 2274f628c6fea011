// Package sched is the worker's scheduler: it owns the KV memory and
// decides, step by step, which sequences run.
//
// Use: New sizes the KV arena (Config.KVMemoryMB or KVBlocks, else from
// the model's context and the machine's memory: engine.DefaultKVArena;
// KVArena says what and why), Start runs the step loop, Generate hands it
// one job and waits for the result, Stop ends the loop (jobs still held
// fail with ErrStopped):
//
//	s, err := sched.New(l.Model, l.Tokenizer, sched.Config{KVMemoryMB: 256})
//	if err != nil { ... }
//	if err := s.Start(ctx); err != nil { ... }
//	defer s.Stop(shutdownCtx)
//	res, stats, err := s.Generate(ctx, &engine.Request{PromptIDs: ids, MaxTokens: 64}, sched.JobOpts{Tenant: "acme", Class: 1})
//
// Every step is one forward pass: a decode token for each running sequence
// plus prefill chunks up to MaxBatchTokens, so jobs join and leave the batch
// at any step and a long prompt never stalls running decodes (continuous
// batching with chunked prefill). The step loop, one goroutine, owns all
// state; Generate hands it a job and waits.
//
// Memory: the KV arena is cut into blocks of BlockTokens positions, each
// sequence holding a block table. A model with sliding-window layers
// (gemma3) has its layers in groups of the same size, global and windowed
// apart (model.KVLayout); a block holds one group's layers, and a sequence
// holds a table per group. The windowed groups give back the blocks their
// window has passed, so a long sequence holds, beyond its global layers'
// blocks, only a window's worth of the others' (pages.go), and admission
// counts a job by what it holds that way. Config.WholeBlocks keeps every
// layer in one block instead (the layout to measure against). Full blocks are content-hashed (a chain
// over all tokens before them) and shared: a job whose prompt starts like a
// cached one reuses its blocks (cached_input_tokens). Unreferenced cached
// blocks stay until their memory is needed, least recently used first.
// A job whose next prompt block is being computed by a running sequence
// (of its class or a higher one) attaches: it waits, unadmitted and
// holding nothing, until that owner has computed the blocks they share,
// then takes them from the cache, so a burst sharing a system prompt
// prefills it once; an owner preempted or canceled stops being waited on
// at once. A job's usage counts the blocks it computed itself, and the
// blocks it shared apart (SharedKVBytes), so that summed over jobs each
// block counts once.
//
// Admission: low_latency (and not-preemptible, and optionally high
// priority) jobs are admitted only with their worst case reserved — the
// banker's rule — and are never evicted (one whose worst case exceeds its
// own max_memory_mb is refused); others are admitted when the blocks not
// already promised (reservations, and the prompts of admitted jobs still
// prefilling) hold the next horizon tokens of every running job and of
// theirs, so admitting a job does not force an eviction within the
// horizon, and may be preempted. The horizon starts at RunQuantum, doubles
// (up to the context) after each step that evicted for memory and halves
// after as many calm steps as it is long. A job evicted because the arena
// ran short looks further from then on: to its whole generation (its
// prompt and max_tokens), kept free for it when it is admitted again and
// while it runs, and while it waits the jobs after it may not take the
// memory it waits for; it is evicted for memory again only when no other
// job of its class can go, so a burst of long documents queues and runs
// in turn instead of evicting each other. Prefix-cache hits that no
// running sequence holds count once: as memory the job takes, not also
// as free memory. The arena is every job's cap: a generation that would
// outgrow it alone stops with memory_limit, and a prompt it can never
// hold is refused (ErrTooLarge). When no waiting job fits whole, one (the
// filler) is admitted with blocks for its first prefill chunk and
// prefills from memory nobody else needs, to the end of their
// generations, never preempting for it; it is the first evicted when
// memory runs short. Candidates are taken in class order (high, normal,
// low; a waiting job rises a class per AgingAfter); within a class the
// tenants' jobs are interleaved so the
// batch fills toward their weighted shares (JobOpts.Weight: the tenant
// that would then run the fewest sequences of the class for its weight
// goes next, ties to the one served the fewest tokens for its weight —
// each running sequence gets a token a step, so shares of the batch are
// shares of the output tokens); and a job that does not fit is skipped
// rather than waited on, so nothing blocks the head of the line. When one
// tenant's jobs hold the batch as another's arrive, the newcomer's jobs
// swap that tenant's out (after their run quantum, host tier only) until
// the weighted shares are even, never past them.
// Within a class reserved jobs come first; one that cannot fit may
// preempt ordinary jobs of its class, and if it still cannot fit, the
// ordinary jobs after it may not take its blocks. A higher class that
// cannot fit preempts lower ones; aging orders the queue but gives no
// right to preempt (a job aged into the running jobs' class would evict
// them, and they it, with the arena nearly empty).
//
// Pace: while sequences decode, a step's prefill chunk is cut so that the
// step stays under MaxStepLatency, from a fit of measured step times to
// a fixed cost, a cost per token and a cost per attended position (a
// chunk deep in a long prompt attends to more), aimed below the bound by
// the measured spread of step times (never below MinPrefillTokens or
// the number of decodes, so prompts progress at least at the decodes'
// pace); a step without decodes takes full chunks.
//
// Latency: a high-priority job that arrives while a step runs that
// carries no high-priority prompt stops that step within half a layer (on a
// synchronous backend, the CPU; the step runs again after admission, and
// batch-invariant kernels make the rerun write the same K and V), and its
// first token gets a step of its own class. For a while after
// high-priority traffic, lower classes prefill in small chunks, so the
// layer (or, where steps cannot be interrupted, as on a GPU that queues a
// whole step at once, the step) in flight at an arrival is short.
//
// Preemption: victims are taken lowest class first; within a class the
// filler first, and a job resumed less than RunQuantum tokens ago or
// once evicted for memory last (it makes progress before it is evicted
// again); then jobs the host tier can take now, by
// lowest priority_score = w_r × remaining_tokens + w_t × temperature (the
// seed's contract), before jobs that could only be recomputed, fewest
// computed tokens first: a recompute costs the victim's whole context, so
// the score (which picks the job closest to finishing) would pick the
// dearest. A growing job that is itself the first in that order waits
// instead. Blocks are copied to the host tier while it has room (resumed
// by copying back), else dropped and recomputed on resume
// (recomputed_tokens; never billed). A preempted job's blocks go back
// to the prefix cache last position first, so that what the cache has
// reused of them by its return is their tail, not its head.
// The tier is the backend's (gpu.NewHostTier): pinned memory and copies on
// the copy stream on CUDA, ordered with the kernels; on the CPU, Go memory
// whose pages are written ahead of use, so that a swap-out for an arrival
// does not wait for first-touch faults. That writing pauses (gpu.Pauser)
// for a step carrying a high-priority job's prompt, so that it does not
// take a processor from the arrival's first token. Slots given back are
// reused before a fresh one is taken, and fresh ones are taken in order,
// so the slots ever used are a prefix of the tier. Host copies older than
// EvictionGCInterval are released.
//
// # Files
//
// Each concern is a file; all of them are methods on Scheduler run by the
// step loop, which alone touches its state (no locks; other goroutines
// read the atomic snapshot).
//
//   - scheduler.go: the types, New, Start/Stop, Generate, the step loop
//     (intake, reaping canceled jobs, shutdown) and finishing a job.
//   - admit.go: admission: the queue and the tenants' fairness counters
//     (enqueue), the order candidates are taken in (classes, aging,
//     tenants), the memory already promised, the filler, and starting a
//     sequence.
//   - preempt.go: eviction: victim order and score, preempting, swapping
//     blocks out to the host tier and back in, and releasing host copies
//     kept too long.
//   - prefix.go: the prefix cache: chain hashes of full blocks, lookups at
//     admission, registering blocks as they fill, attaching to a running
//     sequence's prefill, counting blocks computed twice.
//   - pace.go: the step-time model that sizes prefill chunks beside
//     decodes (MaxStepLatency).
//   - step.go: one forward pass: planning the rows (and growing their
//     blocks), running the batch, applying the results.
//   - blocks.go: the block manager: reference counts, the free list and
//     the content-addressed cache with its LRU.
//   - pages.go: the layer groups' block tables: how many blocks a
//     sequence of so many tokens holds, and giving back what a window
//     has passed.
//   - config.go, errors.go, metrics.go: Config with its defaults, the
//     package's errors, its Prometheus metrics.
//
// # Imports
//
// sched sits between the model and the worker: it may import gpu (the
// device seam: the KV arena, batches, host tiers), worker/engine (a
// generation's sampling and stop rules), worker/model and its tokenizer,
// and Prometheus for its metrics. It must not import the worker package,
// NATS, the database or cmd: the worker imports sched (SchedExecutor), not
// the other way round, and a backend is chosen by the caller, never here
// (tests use gpu/cpu).
package sched
