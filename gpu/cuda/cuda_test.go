//go:build cuda || cudaemu

package cuda_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/cuda"
	"github.com/zerolayer/zerolayer/gpu/gputest"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

var (
	requireDevice = flag.Bool("cuda.required", false, "fail, rather than skip, when no CUDA device is usable")
	sharedDir     = flag.String("cuda.shared", modeltest.SharedDir(), "the shared fixtures folder (models/stories260K)")
	useGraphs     = flag.Bool("cuda.graphs", true, "let the backend replay repeated steps as CUDA graphs")
)

// newBackend opens device 0, skipping the test when there is none (unless
// -cuda.required is given).
func newBackend(t testing.TB) *cuda.Backend {
	t.Helper()
	return newBackendConfig(t, cuda.Config{NoGraphs: !*useGraphs})
}

func newBackendConfig(t testing.TB, cfg cuda.Config) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(cfg)
	if errors.Is(err, gpu.ErrBackendUnavailable) {
		if *requireDevice {
			t.Fatalf("-cuda.required set, but: %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAvailable(t *testing.T) {
	err := cuda.Available()
	if err == nil {
		b := newBackend(t)
		defer b.Close()
		maj, min := b.ComputeCapability()
		free, total, err := b.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: compute capability %d.%d, %d of %d MiB free", b.Name(), maj, min, free>>20, total>>20)
		return
	}
	var nd *cuda.NoDeviceError
	if !errors.As(err, &nd) || !errors.Is(err, gpu.ErrBackendUnavailable) || !strings.HasPrefix(err.Error(), "no CUDA device (") {
		t.Fatalf("Available() = %v (%T); want a *NoDeviceError matching gpu.ErrBackendUnavailable", err, err)
	}
	if _, err := cuda.New(cuda.Config{}); !errors.Is(err, gpu.ErrBackendUnavailable) {
		t.Fatalf("New without a device: %v", err)
	}
	if *requireDevice {
		t.Fatalf("-cuda.required set, but: %v", err)
	}
	t.Skip(err)
}

func TestConformance(t *testing.T) {
	gputest.Run(t, func(t *testing.T) gpu.Backend { return newBackend(t) })
}

// The CUDA backend is compared with the CPU backend on generated models in
// two ways. Against the CPU backend running the same weights dequantized to
// F32 (exactTolerance): both then compute in float32 from identical weight
// values and differ by summation order only, so any kernel error shows.
// Against the CPU backend running the quantized weights themselves
// (quantTolerance): the CPU backend quantizes activations to 8 bits for
// quantized weight types (Q8_0, or Q8_K for the K-quants) while the CUDA
// kernels keep them in float32, so the two differ by that quantization;
// measured on the emulator, about 2e-2 of the largest logit over 6 steps.
// Both bounds are relative to the largest logit of the step.
const exactTolerance = 1e-4

func quantTolerance(t gpu.DType) float64 {
	switch t {
	case gpu.F32, gpu.F16, gpu.BF16:
		return exactTolerance
	}
	return 5e-2
}

// dequantized returns a copy of f with every tensor stored as F32.
func dequantized(t testing.TB, f *gguf.File) *gguf.File {
	t.Helper()
	g, err := synth.Dequantized(f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestModelsMatchCPU decodes generated models (llama, qwen2, qwen3,
// gemma3; with -short llama, and gemma3 in F32 and Q4_K) of every weight type on the CUDA
// backend and on the CPU backend (the quantized model and its F32
// dequantized copy), all fed the CPU backend's greedy tokens, and compares
// every step's logits (see exactTolerance).
func TestModelsMatchCPU(t *testing.T) {
	be := newBackend(t)
	defer be.Close()
	ref := cpu.New(cpu.Config{})
	defer ref.Close()
	prompts := [][]int32{{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {1, 77}, {1, 5, 9, 200}}
	steps, archs := 6, []string{"llama", "qwen2", "qwen3", "gemma3"}
	if testing.Short() {
		steps, archs = 3, []string{"llama", "gemma3"}
	}
	load := func(f *gguf.File, b gpu.Backend) *modeltest.Decoder {
		m, err := model.New(f, b)
		if err != nil {
			t.Fatal(err)
		}
		// Both backends with an F32 KV cache (the CPU's default is F16;
		// CUDA stores F32), so that only the kernels differ.
		if err := m.SetKVType(gpu.F32); err != nil {
			t.Fatal(err)
		}
		return modeltest.NewDecoder(t, m, prompts, 32)
	}
	for _, arch := range archs {
		for _, dt := range gpu.DTypes {
			if testing.Short() && arch == "gemma3" && dt != gpu.F32 && dt != gpu.Q4_K {
				continue
			}
			if _, err := be.NewMatrix(dt, 1, 256, make([]byte, 256/dt.BlockSize()*dt.BlockBytes())); errors.Is(err, gpu.ErrUnsupportedType) {
				continue // a type with no CUDA kernel (Q4_1, Q5_0, ...): CPU only
			} else if err != nil {
				t.Fatalf("%v: %v", dt, err)
			}
			c := synth.Tiny(dt)
			c.Arch, c.Seed = arch, 7
			if arch == "gemma3" {
				// Heads wider than width/heads, a window shorter than the
				// longest prompt, five local layers and a global one.
				c.HeadDim, c.Window, c.Layers, c.Tied = 128, 5, 6, true
			}
			f := modeltest.Build(t, c)
			dg, dc, dx := load(f, be), load(f, ref), load(dequantized(t, f), ref)
			var worstQ, worstX float64
			for s := 0; s < steps; s++ {
				lg, lc, lx := dg.Step(t), dc.Step(t), dx.Step(t)
				for i := range lc {
					for j := range lg[i] {
						if math.IsNaN(float64(lg[i][j])) || math.IsInf(float64(lg[i][j]), 0) {
							t.Fatalf("%s %v: step %d sequence %d: logit %d is %g", arch, dt, s, i, j, lg[i][j])
						}
					}
					worstQ = math.Max(worstQ, modeltest.RelDiff(lg[i], lc[i]))
					worstX = math.Max(worstX, modeltest.RelDiff(lg[i], lx[i]))
				}
				for i := range dc.Next { // all continue with the CPU's tokens
					dg.Next[i] = append([]int32(nil), dc.Next[i]...)
					dx.Next[i] = append([]int32(nil), dc.Next[i]...)
				}
			}
			t.Logf("%s %v: logits differ by %.1e from F32 weights on the CPU (tolerance %.0e), %.1e from %v weights (tolerance %.0e)",
				arch, dt, worstX, exactTolerance, worstQ, dt, quantTolerance(dt))
			if worstX > exactTolerance {
				t.Errorf("%s %v: logits differ from the CPU backend's on the dequantized weights by %.3g of the largest logit (> %g)", arch, dt, worstX, exactTolerance)
			}
			if worstQ > quantTolerance(dt) {
				t.Errorf("%s %v: logits differ from the CPU backend's by %.3g of the largest logit (> %g)", arch, dt, worstQ, quantTolerance(dt))
			}
		}
	}
}

// storiesReference returns the stories260K folder and its reference.json,
// skipping the test when the shared fixtures are absent.
func storiesReference(t *testing.T) (string, modeltest.Reference) {
	t.Helper()
	dir := filepath.Join(*sharedDir, "models", "stories260K")
	return dir, modeltest.ReadReference(t, dir)
}

// TestStories260KReference decodes the reference prompts of stories260K
// greedily, one at a time and all together, and compares the tokens with
// reference.json (llama2.c run.c) and the step-0 logits within 1e-3.
func TestStories260KReference(t *testing.T) {
	dir, ref := storiesReference(t)
	be := newBackend(t)
	defer be.Close()
	f, err := gguf.Open(filepath.Join(dir, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.New(f, be)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cases []modeltest.Case) { modeltest.Greedy(t, m, cases, 0, 1e-3) }
	run(ref.Cases)
	if testing.Short() {
		return
	}
	for _, c := range ref.Cases {
		run([]modeltest.Case{c})
	}
	for _, c := range ref.LongCases {
		run([]modeltest.Case{c})
	}
}

// TestArchReference decodes the five cases of the qwen3 and gemma3 models
// of shared/models/archs together and compares them with llama.cpp's
// greedy outputs: step-0 logits within tol, ids up to the first step whose
// llama.cpp margin is below 2·tol (worker/model's TestArchReference
// explains the tolerances; qwen3's is wider here for the GPU's summation
// orders). A build whose PTX predates the kernels skips it.
func TestArchReference(t *testing.T) {
	be := newBackend(t)
	defer be.Close()
	if err := be.ArchReady(); err != nil {
		t.Skip(err)
	}
	steps := 40
	if testing.Short() {
		steps = 8 // the emulator takes about 30 s for 40
	}
	for _, c := range []struct {
		file string
		tol  float64
	}{{"qwen3-s-f32", 1e-4}, {"gemma3-s-f32", 1.5e-3}} {
		dir := filepath.Join(*sharedDir, "models", "archs")
		path := filepath.Join(dir, c.file+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared fixture %s not present", path)
		}
		refs := modeltest.ReadArchCases(t, filepath.Join(dir, "ref-"+c.file+".txt"))
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(f, be)
		if err != nil {
			t.Fatal(err)
		}
		var cases []modeltest.Case
		for i, r := range refs {
			upTo := min(steps, len(r.IDs))
			for s, mg := range r.Margins[:upTo] {
				if mg < 2*c.tol {
					upTo = s
					break
				}
			}
			cases = append(cases, modeltest.Case{Name: fmt.Sprintf("%s case %d", c.file, i), PromptIDs: r.Prompt,
				GeneratedIDs: r.IDs[:upTo], LogitsStep0: r.Logits0})
		}
		modeltest.Greedy(t, m, cases, steps, c.tol)
		f.Close()
	}
}

// TestSwapTier moves KV blocks to pinned host memory and back (to other
// blocks) and checks that attention over them is unchanged.
func TestSwapTier(t *testing.T) {
	be := newBackend(t)
	defer be.Close()
	r := rand.New(rand.NewPCG(3, 4))
	const kvDim, layers = 16, 2
	kv, err := be.NewKV(gpu.KVConfig{Layers: layers, KVDim: kvDim, Blocks: 6})
	if err != nil {
		t.Fatal(err)
	}
	tensor := func(rows, cols int) gpu.Tensor {
		x, err := be.NewTensor(rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		be.Write(x, v)
		return x
	}
	pos := make([]int32, 40)
	for i := range pos {
		pos[i] = int32(i)
	}
	store := &gpu.Batch{Pos: pos, Seq: make([]int32, 40), Tables: [][]int32{{1, 4, 2}}}
	for l := 0; l < layers; l++ {
		be.StoreKV(kv, l, tensor(40, kvDim), tensor(40, kvDim), store)
	}
	q := tensor(1, 4*8)
	attend := func(tab []int32) []float32 {
		dst, _ := be.NewTensor(1, 4*8)
		be.Attention(dst, q, kv, 1, 4, &gpu.Batch{Pos: []int32{39}, Seq: []int32{0}, Tables: [][]int32{tab}})
		out := make([]float32, 32)
		if err := be.Read(dst, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := attend([]int32{1, 4, 2})
	pool, err := be.NewHostPool(kv, 3)
	if err != nil {
		t.Fatal(err)
	}
	out, err := be.SwapOut(kv, pool, []cuda.BlockMove{{From: 1, To: 0}, {From: 4, To: 2}, {From: 2, To: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Wait(); err != nil {
		t.Fatal(err)
	}
	out.Release()
	host := make([]float32, kv.Config().BlockFloats())
	kv.ReadBlock(4, unsafe.Slice((*byte)(unsafe.Pointer(&host[0])), 4*len(host)))
	if !equal(host, pool.Block(2)) {
		t.Fatal("host slot 2 differs from device block 4 after SwapOut")
	}
	// Clobber the original blocks, then bring the data back elsewhere.
	zero := make([]byte, kv.Config().BlockBytes())
	for _, blk := range []int{1, 2, 4} {
		kv.WriteBlock(blk, zero)
	}
	in, err := be.SwapIn(kv, pool, []cuda.BlockMove{{From: 0, To: 0}, {From: 2, To: 5}, {From: 1, To: 3}})
	if err != nil {
		t.Fatal(err)
	}
	after := attend([]int32{0, 5, 3})
	if done, err := in.Done(); err != nil || !done {
		// Attention's Read waited for the compute stream, which waited
		// for the copies: the fence must be done.
		t.Fatalf("fence after a dependent Read: done %v, %v", done, err)
	}
	in.Release()
	if !equal(before, after) {
		t.Fatalf("attention after swap out and in: %v, want %v", after, before)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestArgmaxAndMask checks the two sampling helpers against plain Go.
func TestArgmaxAndMask(t *testing.T) {
	be := newBackend(t)
	defer be.Close()
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 3, 1000
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	v[cols+17], v[cols+500] = 9, 9 // a tie: the lowest index wins
	x, _ := be.NewTensor(rows, cols)
	be.Write(x, v)
	got := make([]int32, rows)
	if err := be.Argmax(x, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := modeltest.Argmax(v[i*cols : (i+1)*cols]); got[i] != want {
			t.Errorf("argmax row %d = %d, want %d", i, got[i], want)
		}
	}
	// Allow only tokens ≡ 3 (mod 7) in every row, then per row a single token.
	words := cuda.MaskWords(cols)
	mask := make([]uint64, words)
	for i := 3; i < cols; i += 7 {
		mask[i/64] |= 1 << (i % 64)
	}
	be.MaskLogits(x, mask, false)
	if err := be.Argmax(x, got); err != nil {
		t.Fatal(err)
	}
	masked := make([]float32, len(v))
	if err := be.Read(x, masked); err != nil {
		t.Fatal(err)
	}
	for i := range masked {
		if allowed := (i%cols)%7 == 3; allowed != !math.IsInf(float64(masked[i]), -1) || (allowed && masked[i] != v[i]) {
			t.Fatalf("masked logit %d = %g (from %g), allowed %v", i, masked[i], v[i], allowed)
		}
	}
	for i := range got {
		if want := modeltest.Argmax(masked[i*cols : (i+1)*cols]); got[i] != want || got[i]%7 != 3 {
			t.Errorf("masked argmax row %d = %d, want %d", i, got[i], want)
		}
	}
	perRow := make([]uint64, rows*words)
	for i := 0; i < rows; i++ {
		tok := 7*i + 38 // allowed by the first mask too, in a high half word
		perRow[i*words+tok/64] |= 1 << (tok % 64)
	}
	be.MaskLogits(x, perRow, true)
	if err := be.Argmax(x, got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[38 45 52]" {
		t.Errorf("argmax with one allowed token per row = %v, want [38 45 52]", got)
	}
}

// TestGraphs decodes the same sequences with and without CUDA graphs: the
// logits must be identical (no kernel depends on launch order or timing),
// and the repeated decode steps must have been replayed from graphs.
func TestGraphs(t *testing.T) {
	llama := synth.Tiny(gpu.Q8_0)
	llama.Arch = "llama"
	// gemma3 alternates two RoPE configurations and windowed attention
	// with full: its steps must be graphed too.
	gemma := synth.Tiny(gpu.Q8_0)
	gemma.Arch, gemma.HeadDim, gemma.Window, gemma.Layers, gemma.Tied = "gemma3", 128, 5, 6, true
	for _, c := range []synth.Config{llama, gemma} {
		graphsCase(t, c)
	}
}

func graphsCase(t *testing.T, c synth.Config) {
	f := modeltest.Build(t, c)
	prompts := [][]int32{{1, 40, 7, 290, 3}, {1, 77, 5}}
	const steps = 8
	run := func(cfg cuda.Config) ([][]float32, cuda.Stats) {
		be := newBackendConfig(t, cfg)
		defer be.Close()
		m, err := model.New(f, be)
		if err != nil {
			t.Fatal(err)
		}
		d := modeltest.NewDecoder(t, m, prompts, 32)
		var out [][]float32
		for s := 0; s < steps; s++ {
			for _, l := range d.Step(t) {
				out = append(out, append([]float32(nil), l...))
			}
		}
		st, err := be.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return out, st
	}
	plain, ps := run(cuda.Config{NoGraphs: true})
	graphed, gs := run(cuda.Config{})
	t.Logf("%s: without graphs: %+v; with graphs: %+v", c.Arch, ps, gs)
	if ps.GraphLaunches != 0 {
		t.Errorf("%s: graph launches with NoGraphs: %+v", c.Arch, ps)
	}
	if gs.GraphFailures != 0 {
		t.Errorf("%s: graph capture failed: %s", c.Arch, gs.LastGraphError)
	} else if gs.GraphCaptures == 0 || gs.GraphLaunches < steps-3 {
		t.Errorf("%s: repeated decode steps were not replayed from graphs: %+v", c.Arch, gs)
	}
	for i := range plain {
		if !equal(plain[i], graphed[i]) {
			t.Fatalf("%s: row %d of the logits differs with graphs", c.Arch, i)
		}
	}
}
