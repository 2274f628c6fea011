// Package bench holds zerolayer's benchmarks, as `zerolayer bench` runs
// them: each has a Config whose sizes default to the published run, and a
// function that runs it, returns the measurements and writes the report.
//
//   - Models: the forward pass of model files on the CPU (prompt
//     processing, generation, aggregate decode by batch size), set against
//     the machine's memory bandwidth. Results print as a table or JSON.
//   - Scheduler: the continuous-batching scheduler in four parts: batched
//     against one-at-a-time throughput, high-priority time to first token
//     idle and under load, KV utilization under a mixed workload, and
//     swap against recompute resume cost.
//   - Pipeline and Gateway: jobs through a running devstack.Stack, end to
//     end (submit, JetStream, worker, usage, billing's rating), and chat
//     completions through its HTTP gateway against the Go producer.
//   - Serve: llama-server's benchmark load through a running stack: for
//     each level of concurrency that many clients stream chat completions
//     back to back, through the HTTP gateway (SSE) and the Go producer
//     (events); aggregate output tokens per second, time to first token
//     and time per output token, per path and level.
//   - Queue: scenarios through a dev stack of their own each (NATS in the
//     path, tenants submitting with producer.Client, the worker serving):
//     fairness between a tenant's backlog and a late tenant, high-priority
//     time to first token under a low-priority backlog, a small KV arena
//     under pressure with low_latency jobs, and the seed cases (mixed
//     lengths, long-and-short eviction and KV memory back to baseline, a
//     burst sharing a system prompt, a huge prompt under decoders), and
//     tool chain pressure (concurrent jobs with three inline tools in
//     their system prompt, one a regex_matcher with .*, in one pool and
//     in three context_ids: tool time as a share of generation time).
//     Every figure comes from the jobs' usage records (queue_ms,
//     time_to_first_token_ms, inter_token_ms_p99, preemptions,
//     recomputed_tokens, cached_input_tokens, tool_execution_time_ms,
//     created_at, finished_at), the KV gauge from the scheduler's metrics.
//
// Data flows one way: a Config (from flags, or a test's small sizes) in;
// model files, or a stack the caller started and stops, measured; a
// results struct out, and the report written to an io.Writer as each
// part finishes.
//
//	res, err := bench.Models(ctx, bench.ModelConfig{Targets: []bench.Target{bench.FileTarget(path)}, PromptTokens: 512, GenTokens: 128})
//	if err != nil {
//		return err
//	}
//	return res.WriteTable(os.Stdout)
//
// It is what SREs and developers run, so it may import every zerolayer
// package that runs in a process (gpu, worker, producer, ops/devstack);
// nothing imports it but cmd and tests. It reads no flags and no
// environment: that is cmd's business.
package bench
