package model_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

func smallConfig() synth.Config {
	c := synth.Tiny(gpu.F32)
	c.Dim, c.Hidden, c.Heads, c.KVHeads, c.Layers, c.Vocab = 64, 128, 4, 2, 1, 260
	return c
}

func parse(t *testing.T, w *gguf.Writer) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestUnknownArchitecture: a general.architecture zerolayer does not run
// is an error naming it and the supported ones.
func TestUnknownArchitecture(t *testing.T) {
	t.Parallel()
	w, err := synth.Build(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	w.Set("general.architecture", "mamba")
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	_, err = model.New(parse(t, w), be)
	if !errors.Is(err, model.ErrUnsupportedArch) || !strings.Contains(err.Error(), `"mamba"`) {
		t.Fatalf("err %v", err)
	}
	for _, a := range model.Architectures {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error %q does not list %s", err, a)
		}
	}
}

// TestUnsupportedTensorType: a weight in a type no backend runs is an
// error naming the tensor, the type and the supported types.
func TestUnsupportedTensorType(t *testing.T) {
	t.Parallel()
	c := smallConfig()
	w, err := synth.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the model with blk.0.attn_q.weight as IQ2_XXS (16).
	f := parse(t, w)
	w2 := gguf.NewWriter()
	for _, k := range f.Keys {
		w2.Set(k, f.Metadata[k])
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name == "blk.0.attn_q.weight" {
			w2.AddRawTensor(ti.Name, gpu.DType(16), ti.Dims, data)
			continue
		}
		if err := w2.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	_, err = model.New(parse(t, w2), be)
	want := "blk.0.attn_q.weight is IQ2_XXS, which zerolayer does not run; supported: F32"
	if !errors.Is(err, gpu.ErrUnsupportedType) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want %q", err, want)
	}
}
