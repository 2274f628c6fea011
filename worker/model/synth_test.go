package model_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// prefillLogits runs one prompt and returns the last row's logits.
func prefillLogits(t *testing.T, m *model.Model, ids []int32) []float32 {
	t.Helper()
	kv, err := m.NewKV(4, 16)
	if err != nil {
		t.Fatal(err)
	}
	pos := make([]int32, len(ids))
	for i := range pos {
		pos[i] = int32(i)
	}
	out := make([]float32, m.Vocab)
	b := &gpu.Batch{Pos: pos, Seq: make([]int32, len(ids)), Tables: [][]int32{{0, 1, 2, 3}}}
	if err := m.Forward(kv, ids, b, []int32{int32(len(ids) - 1)}, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryType runs generated models of every storage type and checks
// their logits against the same model stored in F32 after a
// quantize-dequantize round trip (so only the kernels differ).
func TestEveryType(t *testing.T) {
	t.Parallel()
	ids := []int32{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	for _, arch := range []string{"llama", "qwen2"} {
		for _, dt := range gpu.DTypes {
			c := synth.Tiny(dt)
			c.Arch = arch
			c.Seed = 42
			f := modeltest.Build(t, c)
			be := cpu.New(cpu.Config{Threads: 2})
			m, err := model.New(f, be)
			if err != nil {
				t.Fatalf("%s %v: %v", arch, dt, err)
			}
			got := prefillLogits(t, m, ids)
			ref := prefillLogits(t, dequantizedCopy(t, f, be), ids)
			var worst, norm float64
			for i := range got {
				if math.IsNaN(float64(got[i])) {
					t.Fatalf("%s %v: NaN logit", arch, dt)
				}
				worst = math.Max(worst, math.Abs(float64(got[i]-ref[i])))
				norm = math.Max(norm, math.Abs(float64(ref[i])))
			}
			tol := 1e-4
			if dt != gpu.F32 && dt != gpu.F16 && dt != gpu.BF16 {
				tol = 0.05 // 8-bit activations in every matmul of every layer
			}
			t.Logf("%s %-4v: max |Δlogit| %.3g = %.2g·(1+max|logit| %.3g)", arch, dt, worst, worst/(1+norm), norm)
			if worst > tol*(1+norm) {
				t.Errorf("%s %v: logits differ from the dequantized F32 model by %g (max |logit| %g)", arch, dt, worst, norm)
			}
			be.Close()
		}
	}
}

// TestMixedTypes loads files whose tensors mix types the way Q3_K_M,
// Q4_K_M and Q5_K_M files do, whole, and checks their logits against the
// dequantized F32 model with TestEveryType's bound for quantized types.
func TestMixedTypes(t *testing.T) {
	t.Parallel()
	ids := []int32{1, 40, 7, 290, 3, 100, 5, 6, 7, 8, 9, 10}
	want := map[string][]gpu.DType{
		"q4_k_m": {gpu.Q4_K, gpu.Q6_K},
		"q3_k_m": {gpu.Q3_K, gpu.Q4_K, gpu.Q5_K, gpu.Q6_K},
		"q5_k_m": {gpu.Q5_K, gpu.Q6_K},
		// 288 wide: rows of 288 values do not split into super-blocks, so
		// they fall back as llama.cpp's do (Q4_K to Q5_0, Q6_K to Q8_0);
		// ffn_down's rows of 512 stay Q6_K.
		"q4_k_m/288": {gpu.Q5_0, gpu.Q8_0, gpu.Q6_K},
	}
	for _, mix := range []string{"q3_k_m", "q4_k_m", "q5_k_m", "q4_k_m/288"} {
		base := synth.Tiny(gpu.F32)
		name, wide, _ := strings.Cut(mix, "/")
		if wide != "" {
			base.Dim = 288
		}
		c, err := synth.Mixed(base, name)
		if err != nil {
			t.Fatal(err)
		}
		c.Seed = 11
		f := modeltest.Build(t, c)
		seen := map[gpu.DType]bool{}
		for _, ti := range f.Tensors {
			seen[ti.Type] = true
		}
		for _, dt := range want[mix] {
			if !seen[dt] {
				t.Errorf("%s: no %v tensor in the file (types %v)", mix, dt, seen)
			}
		}
		be := cpu.New(cpu.Config{Threads: 2})
		m, err := model.New(f, be)
		if err != nil {
			t.Fatalf("%s: %v", mix, err)
		}
		got := prefillLogits(t, m, ids)
		ref := prefillLogits(t, dequantizedCopy(t, f, be), ids)
		var worst, norm float64
		for i := range got {
			if math.IsNaN(float64(got[i])) {
				t.Fatalf("%s: NaN logit", mix)
			}
			worst = math.Max(worst, math.Abs(float64(got[i]-ref[i])))
			norm = math.Max(norm, math.Abs(float64(ref[i])))
		}
		t.Logf("%s: max |Δlogit| %.3g = %.2g·(1+max|logit| %.3g)", mix, worst, worst/(1+norm), norm)
		if worst > 0.05*(1+norm) {
			t.Errorf("%s: logits differ from the dequantized F32 model by %g (max |logit| %g)", mix, worst, norm)
		}
		be.Close()
	}
}

// dequantizedCopy rebuilds f with every tensor converted to F32.
func dequantizedCopy(t *testing.T, f *gguf.File, be gpu.Backend) *model.Model {
	t.Helper()
	g, err := synth.Dequantized(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(g, be)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	c := synth.Tiny(gpu.F32)
	tests := []struct {
		name    string
		edit    func(w *gguf.Writer)
		wantErr error
	}{
		{"unknown arch", func(w *gguf.Writer) { w.Set("general.architecture", "mamba") }, model.ErrUnsupportedArch},
		{"missing block count", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(0)) }, model.ErrBadConfig},
		{"yarn scaling", func(w *gguf.Writer) { w.Set("llama.rope.scaling.type", "yarn") }, model.ErrBadConfig},
		{"more layers than tensors", func(w *gguf.Writer) { w.Set("llama.block_count", uint32(3)) }, model.ErrMissingTensor},
	}
	for _, tt := range tests {
		w, err := synth.Build(c)
		if err != nil {
			t.Fatal(err)
		}
		tt.edit(w)
		var buf bytes.Buffer
		w.WriteTo(&buf)
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := model.New(f, be); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
	// A truncated file is an error, naming the problem.
	w, _ := synth.Build(c)
	var buf bytes.Buffer
	w.WriteTo(&buf)
	if _, err := gguf.Parse(buf.Bytes()[:buf.Len()-100]); !errors.Is(err, gguf.ErrFormat) {
		t.Errorf("truncated model: %v", err)
	}
}

func synthTiny(dt gpu.DType) synth.Config {
	c := synth.Tiny(dt)
	c.Seed = 7
	return c
}
