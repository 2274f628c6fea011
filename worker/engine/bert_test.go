package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/synth"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// bertEngine writes a generated encoder (synth.BERTSmall, arch, type
// and vocabulary as given; nil tokens: the synthetic one) to a file and
// opens an engine on it; it returns the path too.
func bertEngine(t *testing.T, arch string, ty gpu.DType, tokens []string) (*engine.Engine, *tokenizer.Tokenizer, string) {
	t.Helper()
	c := synth.BERTSmall(ty)
	c.Arch, c.Seed, c.Tokens = arch, 11, tokens
	return synthEngine(t, c, 64)
}

// synthEngine writes the generated model c to a file and opens an engine
// of blocks KV blocks on it; it returns the path too.
func synthEngine(t *testing.T, c synth.Config, blocks int) (*engine.Engine, *tokenizer.Tokenizer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), c.Arch+".gguf")
	if err := synth.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	l, err := engine.Load(path, cpu.New(cpu.Config{Threads: 2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	return e, l.Tokenizer, path
}

// embeddingTexts are the comparison inputs: near-empty, short, mixed
// case and punctuation, several scripts, and long ones up to the context
// (maxLen tokens with [CLS] and [SEP]).
func embeddingTexts(maxLen int) []string {
	texts := []string{
		" ", ".", "a", "Hello world", "The quick brown fox jumps over the lazy dog.",
		"MiXeD CaSe, punctuation!!! (and) [brackets] {braces} #tags @you 3.14",
		"Привет, мир! Как дела?", "Γειά σου Κόσμε", "你好，世界。中文文本的嵌入", "こんにちは世界、カタカナ",
		"안녕하세요 세계", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "Café naïve façade Ærøskøbing ŁÓDŹ",
		"emoji 🦙 and symbols $€ ± ∑ unknownwordzzz",
	}
	var words []string
	for i := 0; len(words) < 300; i++ {
		words = append(words, strings.Fields("search query document the quick brown fox над 中 αβγ, embed!")...)
	}
	texts = append(texts, strings.Join(words[:120], " "))
	// One token a word: exactly maxLen tokens in all.
	long := make([]string, maxLen-2)
	for i := range long {
		long[i] = string(rune('a' + i%26))
	}
	return append(texts, strings.Join(long, " "))
}

// The same input alone and among 32 gives the same bits, whichever
// passes the arena cuts the 32 into.
func TestBERTEmbedBatchInvariance(t *testing.T) {
	t.Parallel()
	for _, arch := range []string{"bert", "nomic-bert"} {
		e, tok, _ := bertEngine(t, arch, gpu.F16, nil)
		texts := embeddingTexts(512)
		var ins [][]int32
		for i := 0; len(ins) < 32; i++ {
			ins = append(ins, tok.Encode(texts[i%len(texts)], tokenizer.EncodeOptions{AddSpecial: true}))
		}
		all, err := e.Embed(context.Background(), ins, engine.EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 5, 17, 31} {
			one, err := e.Embed(context.Background(), ins[i:i+1], engine.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(one[0], all[i]) {
				t.Errorf("%s: input %d (%d tokens) alone differs from the batch of 32", arch, i, len(ins[i]))
			}
		}
	}
}

func TestBERTRefusesGeneration(t *testing.T) {
	t.Parallel()
	e, tok, _ := bertEngine(t, "bert", gpu.F32, nil)
	ids := tok.Encode("hello", tokenizer.EncodeOptions{AddSpecial: true})
	_, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 4})
	if !errors.Is(err, model.ErrEncoderOnly) || !errors.Is(err, engine.ErrBadRequest) {
		t.Errorf("Generate: %v, want ErrEncoderOnly and ErrBadRequest", err)
	}
	// An embedding input is fine: a scheduler computes it whole
	// (sched's TestEmbedEncoderThroughScheduler).
	if _, err := engine.NewEmbeddingInput(e.Model(), tok, ids); err != nil {
		t.Errorf("NewEmbeddingInput: %v", err)
	}
}
