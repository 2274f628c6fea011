//go:build cuda || cudaemu

package cuda_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cuda"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

var (
	benchOut   = flag.String("cuda.bench", "", "run TestDecodeBench and write its JSON report to this file")
	benchShape = flag.String("cuda.bench.shape", "1b", "model shape of TestDecodeBench: 1b (dim 2048, 22 layers) or tiny")
	benchTypes = flag.String("cuda.bench.types", "f16,q8_0", "weight types of TestDecodeBench")
	benchSeqs  = flag.String("cuda.bench.seqs", "1,8,32,64", "sequence counts of TestDecodeBench")
	benchSteps = flag.Int("cuda.bench.steps", 32, "timed decode steps per run")
)

// benchConfig returns the generated model of the benchmark: the shape of
// TinyLlama 1.1B (about 1.03B parameters without the embedding).
func benchConfig(t gpu.DType) synth.Config {
	if *benchShape == "tiny" {
		c := synth.Tiny(t)
		c.Context = 512
		return c
	}
	return synth.Config{Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000,
		Context: 2048, Type: t, EmbedType: t}
}

type benchRun struct {
	Seqs        int     `json:"seqs"`
	Context     int     `json:"context"` // positions per sequence at the first timed step
	Steps       int     `json:"steps"`
	StepMs      float64 `json:"step_ms"`        // wall time per decode step, logits read back
	DeviceMs    float64 `json:"device_step_ms"` // one step timed with events
	TokensPerS  float64 `json:"tokens_per_s"`   // seqs × steps / wall time
	BytesPerTok float64 `json:"bytes_per_step"` // weights + KV read per step
	GBps        float64 `json:"gb_per_s"`       // bytes_per_step / step time
	PrefillMs   float64 `json:"prefill_ms"`     // all prompts in one step
}

type benchModel struct {
	Type        string     `json:"type"`
	Params      int64      `json:"params"`
	WeightBytes int64      `json:"weight_bytes"`
	GenerateS   float64    `json:"generate_s"`
	LoadS       float64    `json:"load_s"`
	Runs        []benchRun `json:"runs"`
	// NoGraphs repeats the single-sequence run with CUDA graphs off.
	NoGraphs []benchRun `json:"runs_without_graphs"`
	Stats    cuda.Stats `json:"engine_stats"`
}

type benchReport struct {
	Device          string       `json:"device"`
	ComputeCap      string       `json:"compute_capability"`
	Shape           string       `json:"shape"`
	AddGBps         float64      `json:"add_kernel_gb_per_s"` // HBM bandwidth seen by the add kernel
	Models          []benchModel `json:"models"`
	Error           string       `json:"error,omitempty"`
	PromptTokens    int          `json:"prompt_tokens"`
	BlockTokens     int          `json:"block_tokens"`
	FreeAfterLoadMB int64        `json:"free_after_load_mb"`
}

// TestDecodeBench measures decode throughput of a generated llama-shaped
// model on the device, for the device check (gpu/devicecheck/run.sh). It
// runs only with -cuda.bench=FILE.
func TestDecodeBench(t *testing.T) {
	if *benchOut == "" {
		t.Skip("run with -cuda.bench=FILE")
	}
	be := newBackend(t)
	defer be.Close()
	maj, min := be.ComputeCapability()
	rep := benchReport{Device: be.Name(), ComputeCap: fmt.Sprintf("%d.%d", maj, min), Shape: *benchShape, PromptTokens: 32, BlockTokens: 16}
	defer func() {
		if t.Failed() {
			rep.Error = "test failed; see its log"
		}
		raw, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*benchOut, raw, 0o644); err != nil {
			t.Error(err)
		}
	}()
	rep.AddGBps = addBandwidth(t, be)
	t.Logf("add kernel: %.0f GB/s", rep.AddGBps)
	var seqs []int
	for _, s := range strings.Split(*benchSeqs, ",") {
		var n int
		fmt.Sscan(s, &n)
		seqs = append(seqs, n)
	}
	for _, tn := range strings.Split(*benchTypes, ",") {
		dt, err := gpu.ParseDType(tn)
		if err != nil {
			t.Fatal(err)
		}
		bm := benchModel{Type: dt.String(), Params: benchConfig(dt).Params()}
		start := time.Now()
		f := modeltest.Build(t, benchConfig(dt))
		bm.GenerateS = time.Since(start).Seconds()
		start = time.Now()
		m, err := model.New(f, be)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
		bm.LoadS = time.Since(start).Seconds()
		bm.WeightBytes = m.WeightBytes()
		free, _, _ := be.MemInfo()
		rep.FreeAfterLoadMB = free >> 20
		t.Logf("%v: %d parameters, %d MB of weights read per token, generated in %.1fs, loaded in %.1fs",
			dt, bm.Params, bm.WeightBytes>>20, bm.GenerateS, bm.LoadS)
		for _, n := range seqs {
			r := decodeRun(t, be, m, n, rep.PromptTokens, *benchSteps)
			t.Logf("%v, %d sequences: %.3f ms/step (device %.3f), %.0f tokens/s, %.0f GB/s, prefill %.1f ms",
				dt, n, r.StepMs, r.DeviceMs, r.TokensPerS, r.GBps, r.PrefillMs)
			bm.Runs = append(bm.Runs, r)
		}
		be.SetGraphs(false)
		r := decodeRun(t, be, m, 1, rep.PromptTokens, *benchSteps)
		be.SetGraphs(true)
		t.Logf("%v, 1 sequence without graphs: %.3f ms/step, %.0f tokens/s", dt, r.StepMs, r.TokensPerS)
		bm.NoGraphs = append(bm.NoGraphs, r)
		if bm.Stats, err = be.Stats(); err != nil {
			t.Fatal(err)
		}
		t.Logf("engine: %+v", bm.Stats)
		rep.Models = append(rep.Models, bm)
	}
}

// addBandwidth times dst += x over 256 MiB tensors: 3 × 256 MiB of
// traffic per call.
func addBandwidth(t *testing.T, be *cuda.Backend) float64 {
	const rows, cols = 8192, 8192
	if *benchShape == "tiny" {
		return 0
	}
	x, err := be.NewTensor(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	y, err := be.NewTensor(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	defer be.Free(y)
	be.Add(y, x) // warm up
	const reps = 10
	d, err := be.Time(func() {
		for i := 0; i < reps; i++ {
			be.Add(y, x)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return float64(reps) * 3 * rows * cols * 4 / d.Seconds() / 1e9
}

// decodeRun prefills n sequences of prompt tokens in one step, then times
// steps decode steps of all n together.
func decodeRun(t *testing.T, be *cuda.Backend, m *model.Model, n, prompt, steps int) benchRun {
	const bt = 16
	warm := 4
	per := (prompt + warm + steps + 1 + bt - 1) / bt
	kv, err := m.NewKV(n*per, bt)
	if err != nil {
		t.Fatal(err)
	}
	d := &modeltest.Decoder{Model: m, KV: kv, Tables: make([][]int32, n), Pos: make([]int32, n)}
	for i := 0; i < n; i++ {
		ids := make([]int32, prompt)
		for j := range ids {
			ids[j] = int32(3 + (i*131+j*17)%(m.Vocab-3))
		}
		for j := 0; j < per; j++ {
			d.Tables[i] = append(d.Tables[i], int32(i*per+j))
		}
		d.Next = append(d.Next, ids)
	}
	start := time.Now()
	d.Step(t)
	r := benchRun{Seqs: n, Steps: steps, PrefillMs: float64(time.Since(start).Microseconds()) / 1e3}
	for i := 0; i < warm; i++ {
		d.Step(t)
	}
	r.Context = int(d.Pos[0]) + 1
	dev, err := be.Time(func() { d.Step(t) })
	if err != nil {
		t.Fatal(err)
	}
	r.DeviceMs = float64(dev.Microseconds()) / 1e3
	start = time.Now()
	for i := 0; i < steps; i++ {
		d.Step(t)
	}
	el := time.Since(start)
	r.StepMs = float64(el.Microseconds()) / 1e3 / float64(steps)
	r.TokensPerS = float64(n*steps) / el.Seconds()
	// Per step: every weight once, and each sequence's K and V rows of
	// every layer (at the mean context of the timed steps).
	kvRead := int64(n) * int64(m.Layers) * 2 * int64(m.KVDim()) * 4 * int64(r.Context+steps/2)
	r.BytesPerTok = float64(m.WeightBytes() + kvRead)
	r.GBps = r.BytesPerTok / (r.StepMs / 1e3) / 1e9
	return r
}
