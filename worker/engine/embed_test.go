package engine_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/synth"
)

// embedder loads a generated qwen3 embedding model (pooling last, as
// Qwen3-Embedding's GGUF files say) of type t.
func embedder(t *testing.T, ty gpu.DType, pooling uint32) *engine.Engine {
	t.Helper()
	c := synth.Config{Arch: "qwen3", Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64,
		Vocab: 300, Context: 512, Type: ty, EmbedType: ty, Pooling: pooling, Seed: 3}
	l, err := engine.FromFile(modeltest.Build(t, c), cpu.New(cpu.Config{Threads: 2}))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 96})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func inputs(n int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		in := make([]int32, 1+(i*37)%200)
		for j := range in {
			in[j] = int32(3 + (i*131+j*17)%290)
		}
		out[i] = in
	}
	return out
}

// An input's vector has the same bits alone and in a batch of 32 (and in
// the passes the arena splits a batch into), for every weight type.
func TestEmbedBatchInvariance(t *testing.T) {
	for _, ty := range []gpu.DType{gpu.F32, gpu.Q8_0, gpu.Q4_K} {
		e := embedder(t, ty, uint32(model.PoolLast))
		ins := inputs(32)
		all, err := e.Embed(context.Background(), ins, engine.EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 7, 31} {
			one, err := e.Embed(context.Background(), ins[i:i+1], engine.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for j := range one[0] {
				if math.Float32bits(one[0][j]) != math.Float32bits(all[i][j]) {
					t.Fatalf("%v: input %d component %d: alone %g, in the batch %g", ty, i, j, one[0][j], all[i][j])
				}
			}
		}
	}
}

// Pooling: with causal attention the state at position j is the last
// state of the prefix 0…j, so the mean of a sequence's states is the mean
// of its prefixes' last states, and cls is the one-token prefix's; a
// vector is unit length, and dimensions keeps a prefix, renormalised.
func TestEmbedPooling(t *testing.T) {
	e := embedder(t, gpu.F32, 0)
	ctx := context.Background()
	in := inputs(8)[5]
	var prefixes [][]int32
	for j := 1; j <= len(in); j++ {
		prefixes = append(prefixes, in[:j])
	}
	last, err := e.Embed(ctx, prefixes, engine.EmbedOptions{Pooling: model.PoolLast, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	mean, err := e.Embed(ctx, [][]int32{in}, engine.EmbedOptions{Raw: true}) // no pooling in the file: mean
	if err != nil {
		t.Fatal(err)
	}
	cls, err := e.Embed(ctx, [][]int32{in}, engine.EmbedOptions{Pooling: model.PoolCLS, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	for d := range mean[0] {
		var s float64
		for _, v := range last {
			s += float64(v[d])
		}
		if want := s / float64(len(last)); math.Abs(float64(mean[0][d])-want) > 1e-5*(1+math.Abs(want)) {
			t.Fatalf("mean component %d: %g, want %g", d, mean[0][d], want)
		}
		if cls[0][d] != last[0][d] {
			t.Fatalf("cls component %d: %g, the first position's %g", d, cls[0][d], last[0][d])
		}
	}
	unit, err := e.Embed(ctx, [][]int32{in}, engine.EmbedOptions{Dimensions: 64})
	if err != nil {
		t.Fatal(err)
	}
	var ss, raw float64
	for d, v := range unit[0] {
		ss += float64(v) * float64(v)
		raw += float64(mean[0][d]) * float64(mean[0][d])
	}
	if len(unit[0]) != 64 || math.Abs(ss-1) > 1e-5 {
		t.Fatalf("dimensions 64: %d components of norm² %g", len(unit[0]), ss)
	}
	for d, v := range unit[0] {
		if want := float64(mean[0][d]) / math.Sqrt(raw); math.Abs(float64(v)-want) > 1e-6 {
			t.Fatalf("component %d: %g, want %g", d, v, want)
		}
	}
	if _, err := e.Embed(ctx, [][]int32{in, {}}, engine.EmbedOptions{}); !errors.Is(err, engine.ErrEmptyPrompt) {
		t.Fatalf("an empty input: %v", err)
	}
	if _, err := e.Embed(ctx, [][]int32{make([]int32, 513)}, engine.EmbedOptions{}); !errors.Is(err, engine.ErrPromptTooLong) {
		t.Fatalf("an input past the context: %v", err)
	}
}
