package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/sample"
)

// tinyWriter is a small synthetic llama of vocab 300 (Type F32).
func tinyWriter(t *testing.T, vocab int) *gguf.Writer {
	t.Helper()
	c := synth.Tiny(gpu.F32)
	c.Dim, c.Hidden, c.Heads, c.KVHeads, c.Layers, c.Vocab, c.Seed = 64, 128, 4, 2, 2, vocab, 7
	w, err := synth.Build(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// truncateVocab keeps the first n tokens of the writer's vocabulary.
func truncateVocab(t *testing.T, w *gguf.Writer, n int) {
	t.Helper()
	toks, _ := w.Get("tokenizer.ggml.tokens")
	scores, _ := w.Get("tokenizer.ggml.scores")
	types, _ := w.Get("tokenizer.ggml.token_type")
	w.Set("tokenizer.ggml.tokens", toks.([]string)[:n])
	w.Set("tokenizer.ggml.scores", scores.([]float32)[:n])
	w.Set("tokenizer.ggml.token_type", types.([]int32)[:n])
}

func load(t *testing.T, path string) *engine.Loaded {
	t.Helper()
	be := cpu.New(cpu.Config{Threads: 1})
	t.Cleanup(func() { be.Close() })
	l, err := engine.Load(path, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestPaddedVocab: a model whose embedding has more rows (384) than the
// tokenizer has tokens (300) loads; the padding ids are never sampled,
// even at a high temperature, and decode to nothing.
func TestPaddedVocab(t *testing.T) {
	t.Parallel()
	w := tinyWriter(t, 384)
	truncateVocab(t, w, 300)
	path := filepath.Join(t.TempDir(), "padded.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	l := load(t, path)
	if l.Model.Vocab != 384 || l.Tokenizer.VocabSize() != 300 {
		t.Fatalf("vocab %d, tokenizer %d", l.Model.Vocab, l.Tokenizer.VocabSize())
	}
	if l.Tokenizer.Decode([]int32{350}) != "" {
		t.Error("a padding id decodes to text")
	}
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := l.Prompt("a b c", prompt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 40, IgnoreEOS: true,
			Sampling: sample.Params{Temperature: 2, Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range res.OutputIDs {
			if id >= 300 {
				t.Fatalf("sampled padding id %d: %v", id, res.OutputIDs)
			}
		}
	}
}

// TestVocabLargerThanEmbedding: more tokens than embedding rows is an
// error (Encode could produce ids the model cannot embed).
func TestVocabLargerThanEmbedding(t *testing.T) {
	t.Parallel()
	w := tinyWriter(t, 300)
	toks, _ := w.Get("tokenizer.ggml.tokens")
	scores, _ := w.Get("tokenizer.ggml.scores")
	types, _ := w.Get("tokenizer.ggml.token_type")
	w.Set("tokenizer.ggml.tokens", append(slices.Clone(toks.([]string)), "▁extra"))
	w.Set("tokenizer.ggml.scores", append(slices.Clone(scores.([]float32)), -1000))
	w.Set("tokenizer.ggml.token_type", append(slices.Clone(types.([]int32)), 1))
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(cpu.Config{Threads: 1})
	defer be.Close()
	if _, err := engine.Load(path, be); err == nil || !strings.Contains(err.Error(), "301 tokens") {
		t.Fatalf("err %v", err)
	}
}

// TestSplitModelGenerates: a model written as three gguf-split files loads
// from its first file and generates what the single file does.
func TestSplitModelGenerates(t *testing.T) {
	t.Parallel()
	w := tinyWriter(t, 300)
	dir := t.TempDir()
	single := filepath.Join(dir, "one.gguf")
	if err := w.WriteFile(single); err != nil {
		t.Fatal(err)
	}
	paths, err := w.WriteSplit(filepath.Join(dir, "split"), 3)
	if err != nil {
		t.Fatal(err)
	}
	gen := func(path string) []int32 {
		l := load(t, path)
		e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 64})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := l.Prompt("a b", prompt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 8, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.OutputIDs
	}
	a, b := gen(single), gen(paths[0])
	if !slices.Equal(a, b) || len(a) != 8 {
		t.Fatalf("single file %v, split %v", a, b)
	}
}

// TestAddBOSEOS: tokenizer.ggml.add_bos_token and add_eos_token decide
// whether a raw prompt starts with BOS and ends with EOS.
func TestAddBOSEOS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		bos, eos       any // nil: key absent
		wantBOS, wantE bool
	}{
		{"defaults", nil, nil, true, false},
		{"no bos", false, nil, false, false},
		{"bos and eos", true, true, true, true},
		{"eos only", false, true, false, true},
	} {
		w := tinyWriter(t, 300)
		if tc.bos != nil {
			w.Set("tokenizer.ggml.add_bos_token", tc.bos)
		}
		if tc.eos != nil {
			w.Set("tokenizer.ggml.add_eos_token", tc.eos)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		l := load(t, path)
		ids, err := l.Prompt("a b", prompt.Options{})
		if err != nil || len(ids) == 0 {
			t.Fatalf("%s: %v %v", tc.name, ids, err)
		}
		if got := ids[0] == l.Tokenizer.BOS(); got != tc.wantBOS {
			t.Errorf("%s: ids %v: starts with BOS %v, want %v", tc.name, ids, got, tc.wantBOS)
		}
		if got := ids[len(ids)-1] == l.Tokenizer.EOS(); got != tc.wantE {
			t.Errorf("%s: ids %v: ends with EOS %v, want %v", tc.name, ids, got, tc.wantE)
		}
	}
}
