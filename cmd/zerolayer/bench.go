package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/store"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// benchRow is one measurement.
type benchRow struct {
	Model       string  `json:"model"`
	Type        string  `json:"type"`
	Params      int64   `json:"params"`
	Threads     int     `json:"threads"`
	Test        string  `json:"test"` // pp512, tg128, batch16
	Batch       int     `json:"batch"`
	TokensPerS  float64 `json:"tokens_per_s"`
	WeightGBps  float64 `json:"weight_gb_per_s,omitempty"`
	BandwidthOf float64 `json:"fraction_of_bandwidth,omitempty"`
}

func runBench(ctx context.Context, args []string) error {
	fs := newFlags("bench")
	modelName := fs.String("model", "", "model file path or name")
	syn := fs.String("synthetic", "", "benchmark a generated model instead: 134m (dim 768, hidden 2048, 12 layers, vocab 32000)")
	types := fs.String("type", "f32,q8_0,q4_0", "tensor types of the synthetic model (comma-separated)")
	threadList := fs.String("threads", "1", "thread counts to run (comma-separated)")
	pp := fs.Int("pp", 512, "prompt length for the prompt-processing test (0: skip)")
	tg := fs.Int("tg", 128, "tokens for the generation test (0: skip)")
	batches := fs.String("batch", "", "batch sizes for aggregate decode throughput, e.g. 1,4,16")
	reps := fs.Int("reps", 3, "repetitions per test; the best is reported")
	format := fs.String("format", "table", "output: table or json")
	pipeline := fs.Int("pipeline", 0, "instead: push this many one-token jobs through the whole dev stack and report jobs/s and queue latency")
	gatewayN := fs.Int("gateway", 0, "instead: send this many 32-token chat completions through the HTTP gateway of a dev stack, and the same jobs through the Go producer as the baseline")
	schedBench := fs.Bool("scheduler", false, "instead: benchmark the scheduler (batched vs one-at-a-time, priority latency, KV utilization, swap vs recompute) on --model or the generated 134M Q8_0 model")
	var sf schedFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	threads, err := intList(*threadList)
	if err != nil || len(threads) == 0 {
		return usagef("--threads: want at least one positive number (%v)", err)
	}
	if *schedBench {
		path := ""
		if *modelName != "" {
			if path, err = store.Resolve(*modelName, modelDirs()); err != nil {
				return err
			}
		}
		return benchScheduler(ctx, path, threads[0], stdout)
	}
	if *gatewayN > 0 || *pipeline > 0 {
		m := *modelName
		if m == "" {
			m = devstack.DefaultModel
		}
		mc, err := sf.models([]string{m}, threads[0], nil)
		if err != nil {
			return err
		}
		if *gatewayN > 0 {
			return benchGateway(ctx, *gatewayN, mc, &sf, stdout)
		}
		return benchPipeline(ctx, *pipeline, mc, &sf, stdout)
	}
	bs, err := intList(*batches)
	if err != nil {
		return usagef("--batch: %v", err)
	}
	type target struct{ name, path string }
	var targets []target
	switch {
	case *syn != "" && *modelName != "":
		return usagef("give --model or --synthetic, not both")
	case *syn != "":
		if *syn != "134m" {
			return usagef("--synthetic %q: only 134m is known", *syn)
		}
		dir, err := os.MkdirTemp("", "zerolayer-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, tn := range strings.Split(*types, ",") {
			t, err := gpu.ParseDType(strings.TrimSpace(tn))
			if err != nil {
				return usagef("--type: %v", err)
			}
			p := filepath.Join(dir, "bench134m-"+t.String()+".gguf")
			fmt.Fprintf(os.Stderr, "generating %s ...\n", p)
			if err := synth.WriteFile(p, synth.Bench134M(t)); err != nil {
				return err
			}
			targets = append(targets, target{"synthetic-134m", p})
		}
	default:
		p, err := store.Resolve(*modelName, modelDirs())
		if err != nil {
			return err
		}
		targets = append(targets, target{filepath.Base(p), p})
	}
	bw := map[int]float64{}
	var rows []benchRow
	for _, tg0 := range targets {
		for _, th := range threads {
			if _, ok := bw[th]; !ok {
				bw[th] = cpu.MemoryBandwidth(th)
				fmt.Fprintf(os.Stderr, "memory bandwidth, %d thread(s): %.1f GB/s\n", th, bw[th]/1e9)
			}
			r, err := benchModel(ctx, tg0.name, tg0.path, th, *pp, *tg, bs, *reps, bw[th])
			if err != nil {
				return err
			}
			rows = append(rows, r...)
		}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"bandwidth_bytes_per_s": bw, "results": rows})
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\ttype\tparams\tthreads\ttest\ttok/s\tweights GB/s\t% of bandwidth\t")
	for _, r := range rows {
		gb, frac := "", ""
		if r.WeightGBps > 0 {
			gb, frac = fmt.Sprintf("%.1f", r.WeightGBps), fmt.Sprintf("%.0f%%", 100*r.BandwidthOf)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fM\t%d\t%s\t%.1f\t%s\t%s\t\n", r.Model, r.Type, float64(r.Params)/1e6, r.Threads, r.Test, r.TokensPerS, gb, frac)
	}
	return tw.Flush()
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

// benchModel measures one model at one thread count.
func benchModel(ctx context.Context, name, path string, threads, pp, tg int, batches []int, reps int, bandwidth float64) ([]benchRow, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	be, err := device.Open(device.CPU, threads, nil)
	if err != nil {
		return nil, err
	}
	defer be.Close()
	m, err := model.New(f, be)
	if err != nil {
		return nil, err
	}
	typ := "?"
	if ti, ok := f.Tensor("blk.0.attn_q.weight"); ok {
		typ = ti.Type.String()
	}
	var params int64
	for i := range f.Tensors {
		params += int64(f.Tensors[i].Elements())
	}
	base := benchRow{Model: name, Type: typ, Params: params, Threads: threads}
	var rows []benchRow
	const bt = gpu.DefaultBlockTokens
	maxB := 1
	for _, b := range batches {
		maxB = max(maxB, b)
	}
	seqLen := max(pp, tg+1)
	blocksPer := (seqLen + bt - 1) / bt
	kv, err := m.NewKV(blocksPer*maxB, bt)
	if err != nil {
		return nil, err
	}
	tables := func(n int) [][]int32 {
		t := make([][]int32, n)
		for s := range t {
			for j := 0; j < blocksPer; j++ {
				t[s] = append(t[s], int32(s*blocksPer+j))
			}
		}
		return t
	}
	token := func(i int) int32 { return int32(3 + i%(m.Vocab-3)) }
	best := func(run func() (time.Duration, error)) (time.Duration, error) {
		var b time.Duration
		for r := 0; r < reps; r++ {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			d, err := run()
			if err != nil {
				return 0, err
			}
			if r == 0 || d < b {
				b = d
			}
		}
		return b, nil
	}
	if pp > 0 {
		if pp > m.Context {
			return nil, fmt.Errorf("--pp %d exceeds the context %d", pp, m.Context)
		}
		toks, pos, seq := make([]int32, pp), make([]int32, pp), make([]int32, pp)
		for i := range toks {
			toks[i], pos[i] = token(i), int32(i)
		}
		logits := make([]float32, m.Vocab)
		b := &gpu.Batch{Pos: pos, Seq: seq, Tables: tables(1)}
		d, err := best(func() (time.Duration, error) {
			t0 := time.Now()
			err := m.Forward(kv, toks, b, []int32{int32(pp - 1)}, logits)
			return time.Since(t0), err
		})
		if err != nil {
			return nil, err
		}
		r := base
		r.Test, r.Batch, r.TokensPerS = fmt.Sprintf("pp%d", pp), pp, float64(pp)/d.Seconds()
		rows = append(rows, r)
	}
	decode := func(nseq, steps int) (time.Duration, error) {
		logits := make([]float32, nseq*m.Vocab)
		toks, pos, seq, lr := make([]int32, nseq), make([]int32, nseq), make([]int32, nseq), make([]int32, nseq)
		b := &gpu.Batch{Pos: pos, Seq: seq, Tables: tables(nseq)}
		t0 := time.Now()
		for step := 0; step < steps; step++ {
			for s := 0; s < nseq; s++ {
				toks[s], pos[s], seq[s], lr[s] = token(step+s), int32(step), int32(s), int32(s)
			}
			if err := m.Forward(kv, toks, b, lr, logits); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	wb := float64(m.WeightBytes())
	if tg > 0 {
		d, err := best(func() (time.Duration, error) { return decode(1, tg) })
		if err != nil {
			return nil, err
		}
		r := base
		r.Test, r.Batch, r.TokensPerS = fmt.Sprintf("tg%d", tg), 1, float64(tg)/d.Seconds()
		r.WeightGBps = wb * r.TokensPerS / 1e9
		// A model that fits in the caches is not bound by DRAM: no ratio.
		if bandwidth > 0 && wb > 32<<20 {
			r.BandwidthOf = wb * r.TokensPerS / bandwidth
		}
		rows = append(rows, r)
	}
	for _, nb := range batches {
		steps := max(8, min(tg, 64))
		d, err := best(func() (time.Duration, error) { return decode(nb, steps) })
		if err != nil {
			return nil, err
		}
		r := base
		r.Test, r.Batch, r.TokensPerS = fmt.Sprintf("batch%d", nb), nb, float64(nb*steps)/d.Seconds()
		rows = append(rows, r)
	}
	return rows, nil
}
