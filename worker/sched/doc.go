// Package sched is the worker's scheduler: it owns the KV memory and
// decides, step by step, which sequences run.
//
// Every step is one forward pass: a decode token for each running sequence
// plus prefill chunks up to MaxBatchTokens, so jobs join and leave the batch
// at any step and a long prompt never stalls running decodes (continuous
// batching with chunked prefill). The step loop, one goroutine, owns all
// state; Generate hands it a job and waits.
//
// Memory: the KV arena is cut into blocks of BlockTokens positions, each
// sequence holding a block table. Full blocks are content-hashed (a chain
// over all tokens before them) and shared: a job whose prompt starts like a
// cached one reuses its blocks (cached_input_tokens). Unreferenced cached
// blocks stay until their memory is needed, least recently used first.
//
// Admission: low_latency (and not-preemptible, and optionally high
// priority) jobs are admitted only with their worst case reserved — the
// banker's rule — and are never evicted; others are admitted when their
// prompt fits in the blocks not already promised (reservations, and the
// prompts of admitted jobs still prefilling) with a little headroom, and
// may be preempted. When no waiting job fits whole, one (the filler) is
// admitted with blocks for its first prefill chunk and prefills from
// memory nobody else needs, never preempting for it. Candidates are taken in
// class order (high, normal, low; a waiting job rises a class per
// AgingAfter), the least-served tenant first within a class (virtual token
// counters: each tenant's processed tokens, lifted to the least-served
// active tenant when it returns from idle), and a job that does not fit is
// skipped rather than waited on, so nothing blocks the head of the line. A
// higher class that cannot fit preempts lower ones.
//
// Latency: a high-priority job that arrives while a step without
// high-priority rows runs stops that step at its next layer (on a
// synchronous backend, the CPU; the step runs again after admission, and
// batch-invariant kernels make the rerun write the same K and V), and its
// first token gets a step of its own class. For a while after
// high-priority traffic, lower classes prefill in small chunks, so the
// layer (or, where steps cannot be interrupted, as on a GPU that queues a
// whole step at once, the step) in flight at an arrival is short.
//
// Preemption: victims are taken lowest class first, then lowest
// priority_score = w_r × remaining_tokens + w_t × temperature. Their blocks
// are copied to the host tier while it has room (resumed by copying back),
// else dropped and recomputed on resume (recomputed_tokens; never billed).
// The tier is the backend's (gpu.NewHostTier): pinned memory and copies on
// the copy stream on CUDA, ordered with the kernels. Host copies older
// than EvictionGCInterval are released.
package sched
