package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/ops/bench"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// runBench parses the bench flags and runs one of the benchmarks of
// ops/bench: models (the default), --scheduler, --windows, --pipeline,
// --gateway, --serve or --queue.
func runBench(ctx context.Context, args []string) error {
	fs := newFlags("bench")
	modelName := fs.String("model", "", "model file path or name")
	syn := fs.String("synthetic", "", "benchmark a generated model instead: 134m (llama: dim 768, hidden 2048, 12 layers, vocab 32000, context 8192), qwen3-0.6b or gemma3-270m (those models' shapes, random weights)")
	types := fs.String("type", "f32,q8_0,q4_0", "tensor types of the synthetic model (comma-separated): a GGML type, or a mixed file q3_k_m, q4_k_m, q5_k_m")
	threadList := fs.String("threads", "1", "thread counts to run (comma-separated)")
	pp := fs.Int("pp", 512, "prompt length for the prompt-processing test (0: skip)")
	tg := fs.Int("tg", 128, "tokens for the generation test (0: skip)")
	batches := fs.String("batch", "", "batch sizes for aggregate decode throughput, e.g. 1,4,16")
	kernelList := fs.String("kernels", "", "CPU kernels to measure each model with, in turn (comma-separated): best (the AVX-512 tile kernels where the CPU has them) or avx2 (without them); e.g. avx2,best for the ratio (default: --cpu-kernels)")
	reps := fs.Int("reps", 3, "repetitions per test; the best is reported")
	depth := fs.Int("depth", 0, "the generation test decodes after this many tokens of context (llama-bench -d)")
	format := fs.String("format", "table", "output: table or json")
	pipeline := fs.Int("pipeline", 0, "instead: push this many one-token jobs through the whole dev stack and report jobs/s and queue latency")
	withLimits := fs.Bool("with-limits", false, "with --pipeline: give the bench tenant limits too high to refuse anything, so every job is checked at submit and at the worker (compare with and without)")
	gatewayN := fs.Int("gateway", 0, "instead: send this many 32-token chat completions through the HTTP gateway of a dev stack, and the same jobs through the Go producer as the baseline")
	serve := fs.Bool("serve", false, "instead: llama-server's benchmark shape through a dev stack on --model or the generated 134M Q8_0 model: for each --concurrency level that many clients send streamed chat completions back to back, through the HTTP gateway (SSE) and the Go producer (events); reports output tok/s, TTFT and TPOT (uses the first of --threads)")
	concurrency := fs.String("concurrency", "1,16,32", "with --serve: numbers of clients, one level each (comma-separated)")
	serveRequests := fs.Int("requests", 0, "with --serve: completions per level (0: max(2×clients, 8))")
	serveTokens := fs.Int("tokens", 64, "max_tokens of each completion: with --serve (default 64), --drafts, --documents, and --queue's ordinary jobs (fairness, priority, pressure; default 96)")
	servePeer := fs.String("peer", "", "with --serve: host:port of another OpenAI-compatible server (e.g. llama-server on the same GGUF file) to load the same way after the stack at each level, for a ratio from one run")
	queue := fs.String("queue", "", "instead: run queue scenarios through a dev stack (NATS, producers, worker) on --model or the generated 134M Q8_0 model: fairness, priority, pressure, seed (or one of its parts: seed:mixed, seed:evict, seed:shared, seed:huge), toolchain or all (comma-separated)")
	queueScale := fs.Float64("queue-scale", 1, "with --queue: multiply every scenario's job counts (e.g. 0.25 on a small machine)")
	fleetN := fs.Int("fleet", 0, "instead: multi-turn conversations from two tenants through NATS to separate worker processes of this binary, on one worker and then on this many (each level on a fresh NATS server and fresh workers): jobs/s, the later turns' prefix-cache hit rate (cached ÷ input tokens), how many ran on the previous turn's worker, their TTFT and queue time, and the fleet's ratios to one worker (--model: comma-separated models the workers take in turn, default stories260k; uses the first of --threads per worker)")
	conversations := fs.Int("conversations", 64, "with --fleet: conversations, all at once")
	turns := fs.Int("turns", 6, "with --fleet: turns per conversation, each after the reply to the one before")
	fleetAffinity := fs.Duration("affinity-wait", time.Second, "with --fleet: the workers' --prefix-affinity-wait (0: prefix affinity off, to compare)")
	fleetCluster := fs.Bool("cluster", false, "with --fleet: run NATS as a cluster of three nats-server processes of this binary (zerolayer nats-server), streams of three replicas")
	nodeLoss := fs.Bool("node-loss", false, "with --fleet --cluster: kill the ZL_JOBS leader's node (SIGKILL) a third of the way through each level and restart it 10 s later; reports the longest time without a finished turn")
	fleetDB := fs.String("database-url", "", "with --fleet: run billing (on a schema of its own in this PostgreSQL, made, migrated and dropped per level) and the HTTP gateway as processes beside the workers; the document batch goes through the gateway, and each level reports how many completed jobs billing charged once, not at all, or more than once")
	killWorker := fs.Bool("kill-worker", false, "with --fleet: kill one worker (SIGKILL) halfway and report the longest time without a finished turn after it")
	fairWeight := fs.Float64("fair-weight", 1, "with --queue fairness: tenant-b's weight against tenant-a's 1 (the worker's --tenant-weight); the share error is against it")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (read it with go tool pprof)")
	schedBench := fs.Bool("scheduler", false, "instead: benchmark the scheduler (batched vs one-at-a-time, priority latency, KV utilization, swap vs recompute) on --model or the generated 134M Q8_0 model")
	windows := fs.Bool("windows", false, "instead: measure what giving back sliding-window layers' KV blocks buys: the same long-prompt jobs in the same KV memory with every layer's blocks kept whole and windowed, on --model or the generated Gemma 3 270M-shaped Q8_0 model (uses the first of --threads, and --jobs, --prompt, --new, --kv-memory-mb, --host-swap-mb)")
	wJobs := fs.Int("jobs", 12, "with --windows: jobs, all submitted at once")
	wPrompt := fs.Int("prompt", 2048, "with --windows: prompt tokens of each job")
	wNew := fs.Int("new", 128, "with --windows: new tokens of each job")
	documents := fs.Bool("documents", false, "instead: a document workload through a dev stack's HTTP gateway on --model or the generated 134M Q8_0 model: --docs synthetic documents of --doc-tokens tokens, each a streamed chat completion with the same instruction first and its answer constrained to a JSON schema, at each --concurrency level (default 8), and with --peer the same documents to that server after the stack; reports documents/hour, tokens/s, TTFT, time per document, failures by code, KV and preemptions per document (uses the first of --threads; --tokens sets max_tokens, default 256)")
	docs := fs.Int("docs", 200, "with --documents: number of documents, all sent at every level")
	docTokens := fs.String("doc-tokens", "1000-4000", "with --documents: MIN-MAX length of a document in the model's tokens")
	drafts := fs.Bool("drafts", false, "instead: measure drafting (tokens the constraints force or the context repeats, verified in one forward pass) on --model or the generated 134M Q8_0 model, in process: JSON-schema jobs (--schemas), documents whose answer copies them, and plain chat, each at every --concurrency level (default 1,16) without drafts then with them; reports output tok/s, sampling passes per token, drafted and accepted tokens by source, and whether the outputs were the same (uses the first of --threads; --tokens sets max_tokens, default 128)")
	schemas := fs.String("schemas", "", "with --drafts: a folder of JSON Schemas (or JSONSchemaBench files) for the schemas workload (default: a few of the benchmark's own)")
	schemaLimit := fs.Int("schema-limit", 40, "with --drafts: most schemas taken from --schemas, spread over them")
	workloads := fs.String("workloads", "schemas,copy,chat", "with --drafts: the workloads to run (comma-separated)")
	draftThreshold := fs.Float64("draft-threshold", 0, "with --drafts: feed a draft token when its chance of acceptance exceeds this (0: where the measured step times say it pays, as a worker does)")
	embed := fs.Bool("embed", false, "instead: an embedding load through a dev stack on --model or the generated 134M Q8_0 model: requests of one --chunks-token chunk each (token ids) at each --concurrency level (default 1,16), through the HTTP gateway's /v1/embeddings and the Go producer, and with --peer the same requests to that server (llama-server --embedding --pooling mean on the same GGUF file); reports embeddings/s, tokens/s and latency (uses the first of --threads; --requests per level)")
	chunks := fs.String("chunks", "128,512", "with --embed: chunk lengths in tokens (comma-separated)")
	var sf schedFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	threads, err := intList(*threadList)
	if err != nil || len(threads) == 0 {
		return usagef("--threads: want at least one positive number (%v)", err)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch {
	case *fleetN > 0:
		return benchFleet(ctx, *fleetN, *modelName, threads[0], *conversations, *turns, *fleetAffinity, fleetFaults{cluster: *fleetCluster, nodeLoss: *nodeLoss, killWorker: *killWorker, database: *fleetDB}, fs, *serveTokens, *format)
	case *queue != "":
		base := bench.QueueConfig{Scale: *queueScale, FairWeight: *fairWeight}
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "tokens" {
				base.MaxTokens = *serveTokens
			}
		})
		return benchQueue(ctx, *queue, base, *modelName, threads[0], &sf, *format)
	case *drafts:
		cfg := bench.DraftsConfig{Threads: threads[0], Schemas: *schemas, Limit: *schemaLimit, Threshold: *draftThreshold, Progress: os.Stderr}
		for _, w := range strings.Split(*workloads, ",") {
			if w = strings.TrimSpace(w); w != "" {
				cfg.Workloads = append(cfg.Workloads, w)
			}
		}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "concurrency":
				cfg.Concurrency, err = intList(*concurrency)
			case "tokens":
				cfg.MaxTokens = *serveTokens
			}
		})
		if err != nil {
			return usagef("--concurrency: %v", err)
		}
		if *modelName != "" {
			if cfg.Model, err = store.Resolve(*modelName, modelDirs()); err != nil {
				return err
			}
		}
		_, err := bench.Drafts(ctx, cfg, stdout)
		return err
	case *schedBench:
		cfg := bench.SchedulerConfig{Threads: threads[0], Progress: os.Stderr}
		if *modelName != "" {
			if cfg.Model, err = store.Resolve(*modelName, modelDirs()); err != nil {
				return err
			}
		}
		_, err := bench.Scheduler(ctx, cfg, stdout)
		return err
	case *windows:
		cfg := bench.WindowsConfig{Threads: threads[0], Jobs: *wJobs, Prompt: *wPrompt, NewTokens: *wNew, KVMemoryMB: max(sf.kvMemoryMB, 0), HostSwapMB: sf.hostSwap(), Progress: os.Stderr}
		if *modelName != "" {
			if cfg.Model, err = store.Resolve(*modelName, modelDirs()); err != nil {
				return err
			}
		}
		_, err := bench.Windows(ctx, cfg, stdout)
		return err
	case *serve:
		levels, err := intList(*concurrency)
		if err != nil || len(levels) == 0 {
			return usagef("--concurrency: want at least one positive number (%v)", err)
		}
		cfg := bench.ServeConfig{Concurrency: levels, Tokens: *serveTokens, Requests: *serveRequests, Peer: *servePeer}
		return benchOnStack(ctx, stackOpts{kind: "serve", model: *modelName, gen134M: true, http: true}, threads[0], &sf, func(st *devstack.Stack) error {
			_, err := bench.Serve(ctx, st, cfg, stdout)
			return err
		})
	case *documents:
		cfg := bench.DocumentsConfig{Docs: *docs, Peer: *servePeer, Progress: os.Stderr}
		lo, hi, ok := strings.Cut(*docTokens, "-")
		if cfg.MinTokens, err = strconv.Atoi(strings.TrimSpace(lo)); err != nil || !ok {
			return usagef("--doc-tokens %q: want MIN-MAX, e.g. 1000-4000", *docTokens)
		}
		if cfg.MaxTokens, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || cfg.MinTokens <= 0 || cfg.MaxTokens < cfg.MinTokens {
			return usagef("--doc-tokens %q: want MIN-MAX with 1 ≤ MIN ≤ MAX, e.g. 1000-4000", *docTokens)
		}
		if *docs <= 0 {
			return usagef("--docs %d: want 1 or more", *docs)
		}
		if *format != "table" && *format != "json" {
			return usagef("--format %q: want table or json", *format)
		}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "concurrency":
				cfg.Concurrency, err = intList(*concurrency)
			case "tokens":
				cfg.AnswerTokens = *serveTokens
			}
		})
		if err != nil {
			return usagef("--concurrency: %v", err)
		}
		report := io.Writer(stdout)
		if *format == "json" {
			report = os.Stderr
		}
		return benchOnStack(ctx, stackOpts{kind: "documents", model: *modelName, gen134M: true, http: true}, threads[0], &sf, func(st *devstack.Stack) error {
			res, err := bench.Documents(ctx, st, cfg, report)
			if err == nil && *format == "json" {
				err = res.WriteJSON(stdout)
			}
			return err
		})
	case *embed:
		cfg := bench.EmbedConfig{Requests: *serveRequests, Peer: *servePeer}
		if cfg.Chunks, err = intList(*chunks); err != nil {
			return usagef("--chunks: %v", err)
		}
		concurrencySet := false
		fs.Visit(func(f *flag.Flag) { concurrencySet = concurrencySet || f.Name == "concurrency" })
		if concurrencySet {
			if cfg.Concurrency, err = intList(*concurrency); err != nil {
				return usagef("--concurrency: %v", err)
			}
		}
		return benchOnStack(ctx, stackOpts{kind: "embed", model: *modelName, gen134M: true, http: true}, threads[0], &sf, func(st *devstack.Stack) error {
			_, err := bench.Embed(ctx, st, cfg, stdout)
			return err
		})
	case *gatewayN > 0:
		return benchOnStack(ctx, stackOpts{kind: "gateway", model: *modelName, http: true}, threads[0], &sf, func(st *devstack.Stack) error {
			_, err := bench.Gateway(ctx, st, bench.GatewayConfig{Requests: *gatewayN}, stdout)
			return err
		})
	case *pipeline > 0:
		return benchOnStack(ctx, stackOpts{kind: "pipeline", model: *modelName}, threads[0], &sf, func(st *devstack.Stack) error {
			_, err := bench.Pipeline(ctx, st, bench.PipelineConfig{Jobs: *pipeline, Limits: *withLimits}, stdout)
			return err
		})
	}
	bs, err := intList(*batches)
	if err != nil {
		return usagef("--batch: %v", err)
	}
	cfg := bench.ModelConfig{Threads: threads, PromptTokens: *pp, GenTokens: *tg, Batches: bs, Depth: *depth, Reps: *reps, Progress: os.Stderr}
	// --kv-type (schedFlags) may list several types here: each model is
	// measured with each in turn.
	for _, k := range strings.Split(sf.kvType, ",") {
		if k = strings.TrimSpace(k); k != "" {
			t, err := gpu.ParseDType(k)
			if err != nil {
				return usagef("--kv-type %q: %v", k, err)
			}
			cfg.KVTypes = append(cfg.KVTypes, t)
		}
	}
	if *kernelList == "" {
		*kernelList = sf.cpuKernels
	}
	for _, k := range strings.Split(*kernelList, ",") {
		if k = strings.TrimSpace(k); k != "best" && k != "avx2" {
			return usagef("--kernels %q: want best or avx2 (comma-separated)", k)
		}
		cfg.Kernels = append(cfg.Kernels, k)
	}
	switch {
	case *syn != "" && *modelName != "":
		return usagef("give --model or --synthetic, not both")
	case *syn != "":
		if _, ok := synth.Shape(*syn, gpu.F32); !ok {
			return usagef("--synthetic %q: known shapes are %s", *syn, strings.Join(synth.Shapes, ", "))
		}
		dir, err := os.MkdirTemp("", "zerolayer-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, tn := range strings.Split(*types, ",") {
			tn = strings.ToLower(strings.TrimSpace(tn))
			var target bench.Target
			if t, err := gpu.ParseDType(tn); err == nil {
				target, err = bench.WriteSynthetic(dir, *syn, t, os.Stderr)
				if err != nil {
					return err
				}
			} else if strings.HasSuffix(tn, "_m") {
				if target, err = bench.WriteSyntheticMix(dir, *syn, tn, os.Stderr); err != nil {
					return usagef("--type: %v", err)
				}
			} else {
				return usagef("--type: %v", err)
			}
			cfg.Targets = append(cfg.Targets, target)
		}
	default:
		p, err := store.Resolve(*modelName, modelDirs())
		if err != nil {
			return err
		}
		cfg.Targets = []bench.Target{bench.FileTarget(p)}
	}
	res, err := bench.Models(ctx, cfg)
	if err != nil {
		return err
	}
	if *format == "json" {
		return res.WriteJSON(stdout)
	}
	return res.WriteTable(stdout)
}

// stackOpts says how benchOnStack starts its dev stack.
type stackOpts struct {
	// kind names the temporary folder.
	kind string
	// model is the --model flag. Blank: devstack.DefaultModel, or with
	// gen134M the generated 134M Q8_0 model.
	model   string
	gen134M bool
	// http serves the HTTP gateway.
	http bool
}

// benchOnStack starts a dev stack as o says in a temporary folder, with
// the serving flags, and runs run on it.
func benchOnStack(ctx context.Context, o stackOpts, threads int, sf *schedFlags, run func(*devstack.Stack) error) error {
	model := o.model
	dir, err := os.MkdirTemp("", "zerolayer-bench-"+o.kind+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.gen134M {
		if model, err = modelOr134M(dir, model); err != nil {
			return err
		}
	}
	mc, err := sf.models([]string{cmp.Or(model, devstack.DefaultModel)}, threads, nil)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg := devstack.Config{Dir: dir, DatabaseURL: os.Getenv("DATABASE_URL"), Models: mc, Logger: log}
	if o.http {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	st, err := startStack(ctx, cfg, sf)
	if err != nil {
		return err
	}
	defer stopStack(st)
	return run(st)
}

// modelOr134M returns model or, when it is blank, the generated 134M Q8_0
// model, written into dir.
func modelOr134M(dir, model string) (string, error) {
	if model != "" {
		return model, nil
	}
	t, err := bench.WriteSynthetic134M(dir, gpu.Q8_0, os.Stderr)
	return t.Path, err
}

// fleetFaults are bench --fleet's NATS setup and faults.
// fleetFaults are bench --fleet's options beyond the load: NATS as a
// cluster, the faults to inject, and billing's database (with billing and
// the gateway as processes).
type fleetFaults struct {
	cluster, nodeLoss, killWorker bool
	database                      string
}

// benchFleet runs bench.Fleet with workers (and NATS nodes) of this binary.
func benchFleet(ctx context.Context, n int, models string, threads, conversations, turns int, affinityWait time.Duration, ff fleetFaults, fs *flag.FlagSet, tokens int, format string) error {
	if format != "table" && format != "json" {
		return usagef("--format %q: want table or json", format)
	}
	if ff.nodeLoss && !ff.cluster {
		return usagef("--node-loss needs --cluster")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := bench.FleetConfig{Workers: n, Conversations: conversations, Turns: turns, KillWorker: ff.killWorker, NodeLoss: ff.nodeLoss, Progress: os.Stderr}
	if ff.cluster {
		cfg.Node = func(config string) *exec.Cmd {
			c := exec.Command(exe, "nats-server", "--config", config)
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return c
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "tokens" {
			cfg.MaxTokens = tokens
		}
	})
	for _, m := range strings.Split(cmp.Or(models, devstack.DefaultModel), ",") {
		p, err := store.Resolve(strings.TrimSpace(m), modelDirs())
		if err != nil {
			return err
		}
		cfg.Models = append(cfg.Models, p)
	}
	if cfg.Dir, err = os.MkdirTemp("", "zerolayer-bench-fleet-"); err != nil {
		return err
	}
	defer os.RemoveAll(cfg.Dir)
	cfg.Worker = func(natsURL, model, id string) *exec.Cmd {
		c := exec.Command(exe, "worker", "--nats-url", natsURL, "--model", model, "--id", id, "--threads", fmt.Sprint(threads), "--prefix-affinity-wait", affinityWait.String())
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return c
	}
	if ff.database != "" {
		cfg.DatabaseURL = ff.database
		cfg.Billing = func(natsURL, dbURL string) *exec.Cmd {
			c := exec.Command(exe, "billing", "--nats-url", natsURL, "--database-url", dbURL)
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return c
		}
		cfg.Gateway = func(natsURL, addr string) *exec.Cmd {
			c := exec.Command(exe, "gateway", "--nats-url", natsURL, "--listen", addr, "--insecure-tenant-header")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return c
		}
	}
	report := io.Writer(stdout)
	if format == "json" {
		report = os.Stderr
	}
	res, err := bench.Fleet(ctx, cfg, report)
	if err == nil && format == "json" {
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		err = e.Encode(res)
	}
	return err
}

// benchQueue runs the queue scenarios of list, each on a dev stack of its
// own serving model (default: the generated 134M Q8_0 model) with the
// serving flags, a small arena for pressure.
// benchQueue runs the queue scenarios of list with base's sizes and
// options.
func benchQueue(ctx context.Context, list string, base bench.QueueConfig, model string, threads int, sf *schedFlags, format string) error {
	var scenarios []string
	for _, s := range strings.Split(list, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "all":
			scenarios = append(scenarios, bench.Scenarios()...)
		case slices.Contains(bench.Scenarios(), s):
			scenarios = append(scenarios, s)
		case strings.HasPrefix(s, "seed:") && slices.Contains(bench.SeedParts(), strings.TrimPrefix(s, "seed:")):
			scenarios = append(scenarios, s)
		default:
			return usagef("--queue %q: want %s, all, or seed:<part> with a part of %s", s, strings.Join(bench.Scenarios(), ", "), strings.Join(bench.SeedParts(), ", "))
		}
	}
	if base.Scale <= 0 {
		return usagef("--queue-scale %v: want more than 0", base.Scale)
	}
	if !(base.FairWeight > 0) {
		return usagef("--fair-weight %v: want more than 0", base.FairWeight)
	}
	if format != "table" && format != "json" {
		return usagef("--format %q: want table or json", format)
	}
	dir, err := os.MkdirTemp("", "zerolayer-bench-queue-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if model, err = modelOr134M(dir, model); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	runs := 0
	start := func(ctx context.Context, o bench.StackOpts) (*devstack.Stack, error) {
		mc, err := sf.models([]string{model}, threads, o.Metrics)
		if err != nil {
			return nil, err
		}
		mc.Sched.KVBlocks = o.KVBlocks
		if o.MaxRunning > 0 {
			mc.Sched.MaxRunning = o.MaxRunning
		}
		runs++
		cfg := devstack.Config{Dir: filepath.Join(dir, fmt.Sprint("stack", runs)), DatabaseURL: os.Getenv("DATABASE_URL"), Models: mc, Logger: log, TenantWeights: o.TenantWeights}
		return startStack(ctx, cfg, sf)
	}
	report := io.Writer(stdout)
	if format == "json" {
		report = os.Stderr
	}
	base.Scenarios, base.Stack, base.Progress = scenarios, start, os.Stderr
	res, err := bench.Queue(ctx, base, report)
	if err != nil {
		return err
	}
	if format == "json" {
		return res.WriteJSON(stdout)
	}
	return nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
