package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// Vectors against llama.cpp's llama-embedding (the binary named by
// ZL_LLAMA_EMBEDDING) on the same generated files, for both poolings: a
// cosine of at least 0.9999 per vector, the largest component difference
// reported, and the tokens llama.cpp prints equal to ours.
//
// Tolerance: both evaluate GELU through ggml's float16 table and round
// the inputs of F16 weights to F16, but sum products in other orders
// (SIMD lanes, tiles) and a row in another order where an F16 rounding
// or a table entry can flip; on unit vectors of 128 components that
// leaves differences of order 1e-5 (F32) to 2e-4 (F16). A component
// may differ by 1e-3 at most.
func TestBERTAgainstLlamaCpp(t *testing.T) {
	bin := llamaEmbedding(t)
	type setup struct {
		arch   string
		ty     gpu.DType
		tokens []string // nil: synth.WordPieceVocab
		vocab  string
	}
	setups := []setup{{"bert", gpu.F32, nil, "synthetic"}, {"bert", gpu.F16, nil, "synthetic"}, {"nomic-bert", gpu.F32, nil, "synthetic"}}
	// With ZL_LLAMACPP_VOCAB, also over bge's real vocabulary.
	if dir := os.Getenv("ZL_LLAMACPP_VOCAB"); dir != "" {
		if f, err := gguf.Open(filepath.Join(dir, "ggml-vocab-bert-bge.gguf")); err == nil {
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			setups = append(setups, setup{"bert", gpu.F16, slices.Clone(toks), "bge"})
			f.Close()
		}
	}
	for _, tc := range setups {
		e, tok, path := bertEngine(t, tc.arch, tc.ty, tc.tokens)
		compareLlamaCpp(t, bin, path, e, tok, []model.Pooling{model.PoolCLS, model.PoolMean}, 1e-3,
			fmt.Sprintf("%s %v, %s vocabulary", tc.arch, tc.ty, tc.vocab))
	}
}

// compareLlamaCpp embeds embeddingTexts with e and with llama-embedding
// (bin) on the model file path, for each pooling: the tokens must be
// llama.cpp's, each vector within a cosine of 0.9999 and a component
// difference of maxAbs of llama.cpp's. It logs the least cosine and the
// largest difference under label.
func compareLlamaCpp(t *testing.T, bin, path string, e *engine.Engine, tok *tokenizer.Tokenizer, pools []model.Pooling, maxAbs float64, label string) {
	t.Helper()
	texts := embeddingTexts(e.Model().Context)
	var ins [][]int32
	for i, s := range texts {
		in := tok.Encode(s, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
		// The long texts are the context's length in WordPiece tokens;
		// another tokenizer cuts them into more: shortened by a tenth
		// until they fit, they stay near the context's length.
		for len(in) > e.Model().Context {
			r := []rune(s)
			s = string(r[:len(r)*9/10])
			in = tok.Encode(s, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
		}
		texts[i] = s
		ins = append(ins, in)
	}
	for _, pool := range pools {
		want, toks := runLlamaEmbedding(t, bin, path, texts, pool, e.Model().Context)
		for i := range ins {
			if !slices.Equal(ins[i], toks[i]) {
				t.Errorf("%s: text %d %q: our tokens %v, llama.cpp's %v", label, i, texts[i], ins[i], toks[i])
			}
		}
		got, err := e.Embed(context.Background(), ins, engine.EmbedOptions{Pooling: pool})
		if err != nil {
			t.Fatal(err)
		}
		minCos, worst, shortest, longest := 1.0, 0.0, len(ins[0]), 0
		for i := range got {
			cos, abs := compareVectors(got[i], want[i])
			minCos, worst = min(minCos, cos), max(worst, abs)
			shortest, longest = min(shortest, len(ins[i])), max(longest, len(ins[i]))
			if cos < 0.9999 || abs > maxAbs {
				t.Errorf("%s, pooling %v: text %d (%d tokens): cosine %.6f, max |Δ| %.2e", label, pool, i, len(ins[i]), cos, abs)
			}
		}
		t.Logf("%s, pooling %v: %d inputs of %d-%d tokens: min cosine %.7f, max |Δ| %.2e",
			label, pool, len(ins), shortest, longest, minCos, worst)
	}
}

// llamaEmbedding is the llama-embedding binary ZL_LLAMA_EMBEDDING names;
// it skips the test where there is none.
func llamaEmbedding(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ZL_LLAMA_EMBEDDING")
	if bin == "" {
		t.Skip("ZL_LLAMA_EMBEDDING is not set (the path of llama.cpp's llama-embedding)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("llama-embedding: %v", err)
	}
	return bin
}

// compareVectors returns the cosine of a and b and their largest
// component difference.
func compareVectors(a, b []float32) (cos, maxAbs float64) {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
		maxAbs = max(maxAbs, math.Abs(x-y))
	}
	return ab / math.Sqrt(aa*bb), maxAbs
}

// runLlamaEmbedding embeds texts (one a line) with llama-embedding, its
// context and batches of n tokens, and returns its L2-normalised vectors
// and the tokens it printed for each.
func runLlamaEmbedding(t *testing.T, bin, path string, texts []string, pool model.Pooling, n int) ([][]float32, [][]int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-m", path, "-p", strings.Join(texts, "\n"), "--pooling", pool.String(),
		"--embd-normalize", "2", "--embd-output-format", "json", "-c", strconv.Itoa(n), "-b", strconv.Itoa(n), "-ub", strconv.Itoa(n),
		"-t", "2", "--verbose-prompt")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("llama-embedding: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	i := strings.Index(out, "{\n  \"object\": \"list\"")
	if i < 0 {
		t.Fatalf("llama-embedding printed no JSON:\n%s", out)
	}
	var res struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&res); err != nil {
		// llama.cpp since 7b95ea5 (April 2026) leaks its logger, whose
		// thread prints everything llama-embedding writes: what it has
		// not printed when main returns is lost.
		t.Fatalf("llama-embedding's JSON: %v (%d bytes printed: a build that loses its output's tail at exit needs common_log_pause(common_log_main()) before main returns)", err, len(out)-i)
	}
	if len(res.Data) != len(texts) {
		t.Fatalf("llama-embedding gave %d vectors for %d texts", len(res.Data), len(texts))
	}
	vecs := make([][]float32, len(texts))
	for _, d := range res.Data {
		vecs[d.Index] = d.Embedding
	}
	// --verbose-prompt gives each prompt's token count on stderr
	// ("number of tokens in prompt = N") and its tokens on stdout, one a
	// line ("   id -> 'piece'").
	var counts []int
	for _, m := range regexp.MustCompile(`number of tokens in prompt = (\d+)`).FindAllStringSubmatch(stderr.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		counts = append(counts, n)
	}
	var ids []int32
	for _, m := range regexp.MustCompile(`(?m)^\s*(\d+) -> '`).FindAllStringSubmatch(out[:i], -1) {
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, int32(id))
	}
	if len(counts) != len(texts) {
		t.Fatalf("llama-embedding counted the tokens of %d prompts, want %d", len(counts), len(texts))
	}
	toks := make([][]int32, len(texts))
	for j, n := range counts {
		if len(ids) < n {
			t.Fatalf("llama-embedding listed %d tokens short", n-len(ids))
		}
		toks[j], ids = ids[:n], ids[n:]
	}
	return vecs, toks
}

// TestDecoderEmbeddingsAgainstLlamaCpp: decoders used as embedders, on the
// shared random-weight files (llama.cpp's own reference models): qwen3
// with last-token pooling (Qwen3-Embedding's), gemma3 with mean pooling,
// against llama-embedding's --pooling on the same file. F32 weights: the
// two sum products in other orders only (1e-3 as for bert's F32).
func TestDecoderEmbeddingsAgainstLlamaCpp(t *testing.T) {
	bin := llamaEmbedding(t)
	for _, tc := range []struct {
		file string
		pool model.Pooling
	}{{"qwen3-s-f32.gguf", model.PoolLast}, {"gemma3-s-f32.gguf", model.PoolMean}} {
		path := modeltest.SharedPath(t, filepath.Join("models", "archs", tc.file))
		l, err := engine.Load(path, cpu.New(cpu.Config{Threads: 2}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 256})
		if err != nil {
			t.Fatal(err)
		}
		compareLlamaCpp(t, bin, path, e, l.Tokenizer, []model.Pooling{tc.pool}, 1e-3, tc.file)
	}
}
