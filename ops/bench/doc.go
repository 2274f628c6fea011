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
