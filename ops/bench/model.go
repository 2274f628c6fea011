package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/device"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// Target is one model file to measure.
type Target struct {
	// Name is the model's name in the results (a file name, or
	// "synthetic-134m").
	Name string
	// Path is the GGUF file.
	Path string
}

// FileTarget is the target of a model file, named by its file name.
func FileTarget(path string) Target { return Target{Name: filepath.Base(path), Path: path} }

// ModelConfig configures Models.
type ModelConfig struct {
	// Targets are the models to measure. Required.
	Targets []Target
	// Threads are the CPU thread counts to measure each target at.
	// Defaults to [1].
	Threads []int
	// PromptTokens is the prompt length of the prompt-processing test
	// (ppN). Defaults to 0: no such test.
	PromptTokens int
	// GenTokens is the number of tokens of the generation test (tgN), one
	// sequence. Defaults to 0: no such test.
	GenTokens int
	// Batches are the batch sizes of the aggregate decode tests (batchN),
	// each decoding max(8, min(GenTokens, 64)) steps. Defaults to none.
	Batches []int
	// Kernels are the CPU kernel settings to measure each target with, in
	// turn: "avx2" (the AVX-512 tile kernels off) or "best" (on where the
	// CPU has them). Defaults to ["best"].
	Kernels []string
	// Depth is the context the generation test decodes after (llama-bench
	// -d): its rows attend to Depth earlier positions. Defaults to 0.
	Depth int
	// KVTypes are the KV cache types to measure each target with, in turn
	// (F32, F16). Defaults to the backend's default type alone.
	KVTypes []gpu.DType
	// Reps is how often each test runs; the best run is reported.
	// Defaults to 3.
	Reps int
	// Progress receives a line per measured memory bandwidth. Defaults to
	// io.Discard.
	Progress io.Writer
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ModelConfig) WithDefaults() ModelConfig {
	if len(c.Threads) == 0 {
		c.Threads = []int{1}
	}
	if c.Reps == 0 {
		c.Reps = 3
	}
	if len(c.Kernels) == 0 {
		c.Kernels = []string{"best"}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c ModelConfig) validate() error {
	switch {
	case len(c.Targets) == 0:
		return errors.New("bench: no model to measure: give at least one Target")
	case c.PromptTokens < 0 || c.GenTokens < 0:
		return fmt.Errorf("bench: prompt %d and generation %d tokens: want 0 (skip the test) or more", c.PromptTokens, c.GenTokens)
	case c.Reps < 0:
		return fmt.Errorf("bench: %d repetitions: want 1 or more", c.Reps)
	}
	for _, k := range c.Kernels {
		if k != "avx2" && k != "best" {
			return fmt.Errorf("bench: kernels %q: want avx2 or best", k)
		}
	}
	for _, n := range append(append([]int(nil), c.Threads...), c.Batches...) {
		if n <= 0 {
			return fmt.Errorf("bench: thread count or batch size %d: want a positive number", n)
		}
	}
	return nil
}

// Row is one measurement.
type Row struct {
	Model      string  `json:"model"`
	Type       string  `json:"type"`
	Params     int64   `json:"params"`
	Threads    int     `json:"threads"`
	Kernels    string  `json:"kernels"` // the CPU kernel paths that ran
	KV         string  `json:"kv_type"` // the KV cache type
	Test       string  `json:"test"`    // pp512, tg128, batch16
	Batch      int     `json:"batch"`
	TokensPerS float64 `json:"tokens_per_s"`
	// PeakOf is, for a prompt test, the weights' multiply-adds per second
	// (the layers' projections × tokens/s, plus the output matrix once a
	// prompt, as the pass computes the last row's logits only; attention
	// left out) against the thread count times one thread's peak: the
	// 8-bit integer
	// peak for the types whose products run in 8 bits, the F32 peak for
	// F32, F16 and BF16.
	PeakOf      float64 `json:"fraction_of_peak,omitempty"`
	WeightGBps  float64 `json:"weight_gb_per_s,omitempty"`
	BandwidthOf float64 `json:"fraction_of_bandwidth,omitempty"`
}

// ModelResults are the measurements of Models.
type ModelResults struct {
	// Bandwidth is the machine's memory bandwidth in bytes per second by
	// thread count.
	Bandwidth map[int]float64 `json:"bandwidth_bytes_per_s"`
	// Peak is one thread's most multiply-adds per second (cpu.MeasurePeak).
	Peak cpu.Peak `json:"peak_per_thread"`
	// Rows are the measurements, by target, thread count and test.
	Rows []Row `json:"results"`
}

// Models measures the forward pass of every target at every thread count
// on the CPU: prompt processing, single-sequence generation, and aggregate
// decode throughput per batch size; generation is set against the
// machine's memory bandwidth.
func Models(ctx context.Context, cfg ModelConfig) (*ModelResults, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	res := &ModelResults{Bandwidth: map[int]float64{}}
	was := cpu.SetWideKernels(true)
	defer cpu.SetWideKernels(was)
	if cfg.PromptTokens > 0 {
		res.Peak = cpu.MeasurePeak()
		fmt.Fprintf(cfg.Progress, "peak, 1 thread: %.1f G F32 multiply-adds/s, %.1f G int8 multiply-adds/s\n", res.Peak.F32/1e9, res.Peak.Int8/1e9)
	}
	for _, t := range cfg.Targets {
		for _, th := range cfg.Threads {
			if _, ok := res.Bandwidth[th]; !ok {
				res.Bandwidth[th] = cpu.MemoryBandwidth(th)
				fmt.Fprintf(cfg.Progress, "memory bandwidth, %d thread(s): %.1f GB/s\n", th, res.Bandwidth[th]/1e9)
			}
			for _, k := range cfg.Kernels {
				cpu.SetWideKernels(k == "best")
				kvTypes := []*gpu.DType{nil} // the backend's default
				if len(cfg.KVTypes) > 0 {
					kvTypes = nil
					for i := range cfg.KVTypes {
						kvTypes = append(kvTypes, &cfg.KVTypes[i])
					}
				}
				for _, kt := range kvTypes {
					rows, err := measureModel(ctx, cfg, t, th, res.Bandwidth[th], kt, res.Peak)
					if err != nil {
						return nil, err
					}
					res.Rows = append(res.Rows, rows...)
				}
			}
		}
	}
	return res, nil
}

// WriteJSON writes the results as one indented JSON document.
func (r *ModelResults) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the results as an aligned table, a row per test. Where
// a test also ran with the AVX2 kernels alone, "vs avx2" is the ratio of its
// speed to that run's.
func (r *ModelResults) WriteTable(w io.Writer) error {
	type key struct {
		model, typ, test, kv string
		threads              int
	}
	avx2 := map[key]float64{}
	for _, r := range r.Rows {
		if r.Kernels == "avx2" {
			avx2[key{r.Model, r.Type, r.Test, r.KV, r.Threads}] = r.TokensPerS
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\ttype\tparams\tthreads\tkernels\tkv\ttest\ttok/s\tvs avx2\t% of peak\tweights GB/s\t% of bandwidth\t")
	for _, r := range r.Rows {
		gb, frac, ratio := "", "", ""
		if r.WeightGBps > 0 {
			gb, frac = fmt.Sprintf("%.1f", r.WeightGBps), fmt.Sprintf("%.0f%%", 100*r.BandwidthOf)
		}
		if b := avx2[key{r.Model, r.Type, r.Test, r.KV, r.Threads}]; b > 0 && r.Kernels != "avx2" {
			ratio = fmt.Sprintf("%.2f×", r.TokensPerS/b)
		}
		pk := ""
		if r.PeakOf > 0 {
			pk = fmt.Sprintf("%.0f%%", 100*r.PeakOf)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fM\t%d\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n", r.Model, r.Type, float64(r.Params)/1e6, r.Threads, r.Kernels, r.KV, r.Test, r.TokensPerS, ratio, pk, gb, frac)
	}
	return tw.Flush()
}

// WriteSynthetic134M writes the generated 134M-parameter model (dim 768,
// hidden 2048, 12 layers, vocab 32000) with tensors of type t into dir and
// returns its target; progress gets a line before the file is written.
func WriteSynthetic134M(dir string, t gpu.DType, progress io.Writer) (Target, error) {
	p := filepath.Join(dir, "bench134m-"+t.String()+".gguf")
	fmt.Fprintf(progress, "generating %s ...\n", p)
	return Target{Name: "synthetic-134m", Path: p}, synth.WriteFile(p, synth.Bench134M(t))
}

// WriteSynthetic writes the generated model of the named synth shape (one
// of synth.Shapes: 134m, qwen3-0.6b, gemma3-270m) with tensors of type t
// into dir and returns its target; progress gets a line before the file is
// written.
func WriteSynthetic(dir, shape string, t gpu.DType, progress io.Writer) (Target, error) {
	c, ok := synth.Shape(shape, t)
	if !ok {
		return Target{}, fmt.Errorf("bench: synthetic shape %q (known: %v)", shape, synth.Shapes)
	}
	p := filepath.Join(dir, "bench"+shape+"-"+t.String()+".gguf")
	fmt.Fprintf(progress, "generating %s ...\n", p)
	return Target{Name: "synthetic-" + shape, Path: p}, synth.WriteFile(p, c)
}

// WriteSyntheticMix is WriteSynthetic with the tensor types of a
// llama.cpp-style mixed file (synth.Mixed: q3_k_m, q4_k_m, q5_k_m).
func WriteSyntheticMix(dir, shape, mix string, progress io.Writer) (Target, error) {
	c, ok := synth.Shape(shape, gpu.F32)
	if !ok {
		return Target{}, fmt.Errorf("bench: synthetic shape %q (known: %v)", shape, synth.Shapes)
	}
	c, err := synth.Mixed(c, mix)
	if err != nil {
		return Target{}, err
	}
	p := filepath.Join(dir, "bench"+shape+"-"+mix+".gguf")
	fmt.Fprintf(progress, "generating %s ...\n", p)
	return Target{Name: "synthetic-" + shape + "-" + mix, Path: p}, synth.WriteFile(p, c)
}

// measureModel measures one target at one thread count with KV cache type
// kvType (nil: the backend's default).
func measureModel(ctx context.Context, cfg ModelConfig, t Target, threads int, bandwidth float64, kvType *gpu.DType, peak cpu.Peak) ([]Row, error) {
	f, err := gguf.Open(t.Path)
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
	if kvType != nil {
		if err := m.SetKVType(*kvType); err != nil {
			return nil, err
		}
	}
	if cfg.PromptTokens > m.Context || cfg.Depth+cfg.GenTokens > m.Context {
		return nil, fmt.Errorf("bench: a prompt of %d tokens or %d generated after %d exceeds the context %d of %s", cfg.PromptTokens, cfg.GenTokens, cfg.Depth, m.Context, t.Name)
	}
	maxB := 1
	for _, b := range cfg.Batches {
		maxB = max(maxB, b)
	}
	r, err := newModelRun(ctx, m, max(cfg.PromptTokens, cfg.Depth+cfg.GenTokens+1), maxB, cfg.Reps)
	if err != nil {
		return nil, err
	}
	base := Row{Model: t.Name, Type: "?", Threads: threads, Kernels: cpu.KernelPaths(), KV: m.KVType().String()}
	if ti, ok := f.Tensor("blk.0.attn_q.weight"); ok {
		base.Type = ti.Type.String()
	}
	for i := range f.Tensors {
		base.Params += int64(f.Tensors[i].Elements())
	}
	var rows []Row
	if pp := cfg.PromptTokens; pp > 0 {
		d, err := r.best(func() (time.Duration, error) { return r.prefill(pp) })
		if err != nil {
			return nil, err
		}
		row := base
		row.Test, row.Batch, row.TokensPerS = fmt.Sprintf("pp%d", pp), pp, float64(pp)/d.Seconds()
		p := peak.Int8
		switch m.Type() {
		case gpu.F32, gpu.F16, gpu.BF16:
			p = peak.F32
		}
		if p > 0 {
			// The multiply-adds the pass does: every layer's projections
			// for each prompt token, the output matrix for the last one
			// (the logits asked for).
			out := float64(m.OutputMatMulParams())
			perToken := float64(m.MatMulParams()) - out + out/float64(pp)
			row.PeakOf = row.TokensPerS * perToken / (p * float64(threads))
		}
		rows = append(rows, row)
	}
	wb := float64(m.WeightBytes())
	if tg := cfg.GenTokens; tg > 0 {
		d, err := r.best(func() (time.Duration, error) { return r.decode(1, cfg.Depth, tg) })
		if err != nil {
			return nil, err
		}
		row := base
		row.Test, row.Batch, row.TokensPerS = fmt.Sprintf("tg%d", tg), 1, float64(tg)/d.Seconds()
		if cfg.Depth > 0 {
			row.Test += fmt.Sprintf("@d%d", cfg.Depth)
		}
		row.WeightGBps = wb * row.TokensPerS / 1e9
		// A model that fits in the caches is not bound by DRAM: no ratio.
		if bandwidth > 0 && wb > 32<<20 {
			row.BandwidthOf = wb * row.TokensPerS / bandwidth
		}
		rows = append(rows, row)
	}
	for _, nb := range cfg.Batches {
		steps := max(8, min(cfg.GenTokens, 64))
		d, err := r.best(func() (time.Duration, error) { return r.decode(nb, 0, steps) })
		if err != nil {
			return nil, err
		}
		row := base
		row.Test, row.Batch, row.TokensPerS = fmt.Sprintf("batch%d", nb), nb, float64(nb*steps)/d.Seconds()
		rows = append(rows, row)
	}
	return rows, nil
}

// modelRun runs timed forward passes of one model over a KV cache with
// room for seqs sequences.
type modelRun struct {
	ctx       context.Context
	m         *model.Model
	kv        gpu.KV
	blocksPer int
	reps      int
}

func newModelRun(ctx context.Context, m *model.Model, seqLen, seqs, reps int) (*modelRun, error) {
	const bt = gpu.DefaultBlockTokens
	blocksPer := (seqLen + bt - 1) / bt
	kv, err := m.NewKV(blocksPer*seqs, bt)
	if err != nil {
		return nil, err
	}
	return &modelRun{ctx: ctx, m: m, kv: kv, blocksPer: blocksPer, reps: reps}, nil
}

// tables are the block tables of n sequences, each its own blocks.
func (r *modelRun) tables(n int) [][]int32 {
	t := make([][]int32, n)
	for s := range t {
		for j := 0; j < r.blocksPer; j++ {
			t[s] = append(t[s], int32(s*r.blocksPer+j))
		}
	}
	return t
}

// token is the i-th input token: any but the first three (special) ids.
func (r *modelRun) token(i int) int32 { return int32(3 + i%(r.m.Vocab-3)) }

// best runs run reps times and returns the shortest time.
func (r *modelRun) best(run func() (time.Duration, error)) (time.Duration, error) {
	var b time.Duration
	for i := 0; i < r.reps; i++ {
		if err := r.ctx.Err(); err != nil {
			return 0, err
		}
		d, err := run()
		if err != nil {
			return 0, err
		}
		if i == 0 || d < b {
			b = d
		}
	}
	return b, nil
}

// prefill times one forward pass of a pp-token prompt.
func (r *modelRun) prefill(pp int) (time.Duration, error) {
	toks, pos, seq := make([]int32, pp), make([]int32, pp), make([]int32, pp)
	for i := range toks {
		toks[i], pos[i] = r.token(i), int32(i)
	}
	logits := make([]float32, r.m.Vocab)
	b := &gpu.Batch{Pos: pos, Seq: seq, Tables: r.tables(1)}
	t0 := time.Now()
	err := r.m.Forward(r.kv, toks, b, []int32{int32(pp - 1)}, logits)
	return time.Since(t0), err
}

// decode times steps decode steps of nseq sequences together, at
// positions from, from+1, …: each step's rows attend to the positions
// before theirs, which must be in r.kv (garbage is fine, as in a prompt
// of random tokens).
func (r *modelRun) decode(nseq, from, steps int) (time.Duration, error) {
	logits := make([]float32, nseq*r.m.Vocab)
	toks, pos, seq, lr := make([]int32, nseq), make([]int32, nseq), make([]int32, nseq), make([]int32, nseq)
	b := &gpu.Batch{Pos: pos, Seq: seq, Tables: r.tables(nseq)}
	t0 := time.Now()
	for step := 0; step < steps; step++ {
		for s := 0; s < nseq; s++ {
			toks[s], pos[s], seq[s], lr[s] = r.token(step+s), int32(from+step), int32(s), int32(s)
		}
		if err := r.m.Forward(r.kv, toks, b, lr, logits); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}
