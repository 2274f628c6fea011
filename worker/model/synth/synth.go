package synth

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// Config is the shape of a generated model.
type Config struct {
	// Arch is "llama" (the default), "qwen2", "qwen3", "gemma3", or an
	// encoder, "bert" or "nomic-bert" (see buildEncoder), or
	// "gemma-embedding" (gemma3's layers as an encoder: see
	// EmbeddingGemmaSmall).
	Arch    string
	Dim     int
	Hidden  int
	Layers  int
	Heads   int
	KVHeads int // defaults to Heads
	// HeadDim is the width of one attention head, written as
	// attention.key_length and value_length for qwen3 and gemma3. Defaults
	// to Dim/Heads; other architectures require that.
	HeadDim int
	// Window is gemma3's attention.sliding_window. Defaults to 512.
	Window int
	// Period is gemma-embedding's attention.sliding_window_pattern (every
	// Period-th layer global); 0 writes none (llama.cpp's default, 6).
	Period int
	// Dense is the width of gemma-embedding's dense projections after
	// pooling (dense_2: Dim→Dense, dense_3: Dense→Dim); 0: none.
	Dense int
	// RopeBase is rope.freq_base. Defaults to 10000.
	RopeBase float32
	Vocab    int // at least 259
	Context  int // defaults to 2048
	// Type is the storage type of the weight matrices; norms stay F32.
	Type gpu.DType
	// EmbedType is the type of the token embedding. Defaults to Type.
	EmbedType gpu.DType
	// Types overrides Type (and EmbedType) for the tensors named by key,
	// without the "blk.N." prefix ("ffn_down.weight", "output.weight"), to
	// build files that mix types the way llama.cpp's _M files do (Mixed).
	Types map[string]gpu.DType
	// Tied omits output.weight, so the classifier reuses the embedding.
	Tied bool
	Seed uint64
	// ChatTemplate, if set, is stored as tokenizer.chat_template.
	ChatTemplate string
	// Pooling, if set, is stored as <arch>.pooling_type (an embedding
	// model: 1 mean, 2 cls, 3 last). Encoders default to 2 (cls) for
	// bert, 1 (mean) for nomic-bert.
	Pooling uint32
	// Tokens is an encoder's WordPiece vocabulary in llama.cpp's
	// convention ("▁word", bare continuations), with [PAD], [UNK],
	// [CLS], [SEP] and [MASK] among them (a bge GGUF's
	// tokenizer.ggml.tokens will do). Nil: WordPieceVocab(Vocab).
	Tokens []string
}

// Bench134M is the benchmark shape of about 134M parameters (dim 768,
// hidden 2048, 12 layers, 12 heads, vocab 32000), with a context of 8192
// so that prompts of 4096 can be measured.
func Bench134M(t gpu.DType) Config {
	return Config{Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, Vocab: 32000, Context: 8192, Type: t, EmbedType: t}
}

// Qwen3_0_6B is the shape of Qwen3-0.6B (dim 1024, hidden 3072, 28
// layers, 16 heads, 8 KV heads, head_dim 128, vocab 151936, rope base 1e6,
// tied output) with random weights.
func Qwen3_0_6B(t gpu.DType) Config {
	return Config{Arch: "qwen3", Dim: 1024, Hidden: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Context: 40960, RopeBase: 1e6, Tied: true, Type: t, EmbedType: t}
}

// Gemma3_270M is the shape of Gemma 3 270M (dim 640, hidden 2048, 18
// layers, 4 heads, 1 KV head, head_dim 256, vocab 262144, window 512,
// rope base 1e6, tied output) with random weights.
func Gemma3_270M(t gpu.DType) Config {
	return Config{Arch: "gemma3", Dim: 640, Hidden: 2048, Layers: 18, Heads: 4, KVHeads: 1, HeadDim: 256,
		Vocab: 262144, Context: 32768, Window: 512, RopeBase: 1e6, Tied: true, Type: t, EmbedType: t}
}

// Shapes names the benchmark shapes Shape knows.
var Shapes = []string{"134m", "qwen3-0.6b", "gemma3-270m"}

// Shape returns the named shape (one of Shapes) at type t.
func Shape(name string, t gpu.DType) (Config, bool) {
	switch name {
	case "134m":
		return Bench134M(t), true
	case "qwen3-0.6b":
		return Qwen3_0_6B(t), true
	case "gemma3-270m":
		return Gemma3_270M(t), true
	}
	return Config{}, false
}

// Mixed returns c with the tensor types of a llama.cpp-style mixed file:
// "q4_k_m" (Q4_K with Q6_K for attn_v, ffn_down and the output), "q3_k_m"
// (Q3_K with Q5_K for attn_v, Q4_K for attn_output and ffn_down, Q6_K for
// the output) and "q5_k_m" (Q5_K with Q6_K for attn_v, ffn_down and the
// output). A tensor whose rows do not split into 256-value super-blocks
// falls back as llama.cpp's does (Q4_K to Q5_0, Q6_K to Q8_0: see
// rowFallback), so a Gemma 3 270M-shaped q4_k_m is mostly Q5_0 and Q8_0,
// as the published files are. llama.cpp varies the choice by layer; these
// apply it to every layer.
func Mixed(c Config, mix string) (Config, error) {
	switch mix {
	case "q4_k_m":
		c.Type, c.EmbedType = gpu.Q4_K, gpu.Q4_K
		c.Types = map[string]gpu.DType{"attn_v.weight": gpu.Q6_K, "ffn_down.weight": gpu.Q6_K, "output.weight": gpu.Q6_K}
	case "q3_k_m":
		c.Type, c.EmbedType = gpu.Q3_K, gpu.Q3_K
		c.Types = map[string]gpu.DType{"attn_v.weight": gpu.Q5_K, "attn_output.weight": gpu.Q4_K, "ffn_down.weight": gpu.Q4_K, "output.weight": gpu.Q6_K}
	case "q5_k_m":
		c.Type, c.EmbedType = gpu.Q5_K, gpu.Q5_K
		c.Types = map[string]gpu.DType{"attn_v.weight": gpu.Q6_K, "ffn_down.weight": gpu.Q6_K, "output.weight": gpu.Q6_K}
	default:
		return c, fmt.Errorf("synth: unknown mix %q (q3_k_m, q4_k_m, q5_k_m)", mix)
	}
	return c, nil
}

// trimBlock strips the "blk.N." prefix of a layer tensor's name.
func trimBlock(name string) string {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			return rest[i+1:]
		}
	}
	return name
}

// Tiny is a model small enough for unit tests; dims are multiples of 256 so
// every type, K-quants included, applies.
func Tiny(t gpu.DType) Config {
	return Config{Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 300, Type: t, EmbedType: t}
}

// Params returns the number of parameters of the model.
func (c Config) Params() int64 {
	c = c.withDefaults()
	kv, q := c.HeadDim*c.KVHeads, c.HeadDim*c.Heads
	per := int64(c.Dim)*int64(q)*2 + int64(c.Dim)*int64(kv)*2 + 3*int64(c.Dim)*int64(c.Hidden) + 2*int64(c.Dim)
	if c.qkNorm() {
		per += 2 * int64(c.HeadDim)
	}
	if c.gemma() {
		per += 2 * int64(c.Dim)
	}
	n := per*int64(c.Layers) + int64(c.Vocab)*int64(c.Dim) + int64(c.Dim) + 2*int64(c.Dim)*int64(c.Dense)
	if !c.Tied {
		n += int64(c.Vocab) * int64(c.Dim)
	}
	return n
}

// qkNorm reports whether the architecture has per-head Q/K norms and a
// free head size.
func (c Config) qkNorm() bool { return c.Arch == "qwen3" || c.gemma() }

// gemma reports whether the architecture has gemma3's layers: post norms
// and sliding windows.
func (c Config) gemma() bool { return c.Arch == "gemma3" || c.Arch == "gemma-embedding" }

func (c Config) withDefaults() Config {
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Context == 0 {
		c.Context = 2048
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if c.Window == 0 {
		c.Window = 512
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	if c.EmbedType == 0 && c.Type != 0 {
		c.EmbedType = c.Type
	}
	return c
}

// Build returns a GGUF writer holding the model.
func Build(c Config) (*gguf.Writer, error) {
	if c.Arch == "bert" || c.Arch == "nomic-bert" {
		return buildEncoder(c)
	}
	c = c.withDefaults()
	if c.Vocab < 259 || c.Dim <= 0 || c.Heads <= 0 || c.Heads%c.KVHeads != 0 || c.HeadDim <= 0 ||
		(!c.qkNorm() && c.HeadDim*c.Heads != c.Dim) {
		return nil, fmt.Errorf("synth: bad shape %+v", c)
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	w := gguf.NewWriter()
	a := c.Arch
	setShape(w, c)
	w.Set(a+".attention.head_count_kv", uint32(c.KVHeads))
	w.Set(a+".attention.layer_norm_rms_epsilon", float32(1e-5))
	w.Set(a+".rope.freq_base", c.RopeBase)
	w.Set(a+".rope.dimension_count", uint32(c.HeadDim))
	if c.qkNorm() {
		w.Set(a+".attention.key_length", uint32(c.HeadDim))
		w.Set(a+".attention.value_length", uint32(c.HeadDim))
	}
	if c.gemma() {
		w.Set(a+".attention.sliding_window", uint32(c.Window))
	}
	setVocab(w, c.Vocab)
	if c.ChatTemplate != "" {
		w.Set("tokenizer.chat_template", c.ChatTemplate)
	}
	if c.Pooling != 0 {
		w.Set(a+".pooling_type", c.Pooling)
	}
	tw := &tensorWriter{w: w, r: r, types: c.Types}
	add, norm := tw.add, tw.norm
	kvDim, qDim := c.HeadDim*c.KVHeads, c.HeadDim*c.Heads
	s := 1 / math.Sqrt(float64(c.Dim))
	add("token_embd.weight", c.EmbedType, c.Vocab, c.Dim, 1)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		norm(p+"attn_norm.weight", c.Dim)
		add(p+"attn_q.weight", c.Type, qDim, c.Dim, s)
		add(p+"attn_k.weight", c.Type, kvDim, c.Dim, s)
		add(p+"attn_v.weight", c.Type, kvDim, c.Dim, s)
		if a == "qwen2" {
			norm(p+"attn_q.bias", c.Dim)
			norm(p+"attn_k.bias", kvDim)
			norm(p+"attn_v.bias", kvDim)
		}
		if c.qkNorm() {
			norm(p+"attn_q_norm.weight", c.HeadDim)
			norm(p+"attn_k_norm.weight", c.HeadDim)
		}
		add(p+"attn_output.weight", c.Type, c.Dim, qDim, 1/math.Sqrt(float64(qDim)))
		if c.gemma() {
			norm(p+"post_attention_norm.weight", c.Dim)
		}
		norm(p+"ffn_norm.weight", c.Dim)
		add(p+"ffn_gate.weight", c.Type, c.Hidden, c.Dim, s)
		add(p+"ffn_up.weight", c.Type, c.Hidden, c.Dim, s)
		add(p+"ffn_down.weight", c.Type, c.Dim, c.Hidden, 1/math.Sqrt(float64(c.Hidden)))
		if c.gemma() {
			norm(p+"post_ffw_norm.weight", c.Dim)
		}
	}
	norm("output_norm.weight", c.Dim)
	if a == "gemma-embedding" {
		setGemmaEmbedding(w, tw, c)
	} else if !c.Tied {
		add("output.weight", c.Type, c.Vocab, c.Dim, s)
	}
	if tw.err != nil {
		return nil, fmt.Errorf("synth: %w", tw.err)
	}
	return w, nil
}

// setShape writes the architecture, a name, and the hyper-parameters
// every architecture has.
func setShape(w *gguf.Writer, c Config) {
	a := c.Arch
	w.Set("general.architecture", a)
	w.Set("general.name", fmt.Sprintf("synthetic %s %v", a, c.Type))
	w.Set(a+".context_length", uint32(c.Context))
	w.Set(a+".embedding_length", uint32(c.Dim))
	w.Set(a+".block_count", uint32(c.Layers))
	w.Set(a+".feed_forward_length", uint32(c.Hidden))
	w.Set(a+".attention.head_count", uint32(c.Heads))
}

// tensorWriter adds random tensors to a writer, keeping the first error.
type tensorWriter struct {
	w     *gguf.Writer
	r     *rand.Rand
	types map[string]gpu.DType // Config.Types
	err   error
}

// add writes a rows×cols matrix (a vector when rows is 1) of normal
// values of standard deviation scale, stored as t (or as Types says).
func (tw *tensorWriter) add(name string, t gpu.DType, rows, cols int, scale float64) {
	if tw.err != nil {
		return
	}
	if o, ok := tw.types[trimBlock(name)]; ok {
		t = o
	}
	t = rowFallback(t, cols)
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(tw.r.NormFloat64() * scale)
	}
	var data []byte
	if data, tw.err = quant.Quantize(t, v); tw.err != nil {
		return
	}
	dims := []uint64{uint64(cols)}
	if rows > 1 {
		dims = append(dims, uint64(rows))
	}
	tw.err = tw.w.AddTensor(name, t, dims, data)
}

// norm writes a norm weight of n values near 1, in F32.
func (tw *tensorWriter) norm(name string, n int) {
	if tw.err != nil {
		return
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(1 + 0.1*tw.r.NormFloat64())
	}
	data, _ := quant.Quantize(gpu.F32, v)
	tw.err = tw.w.AddTensor(name, gpu.F32, []uint64{uint64(n)}, data)
}

// WriteFile builds the model and writes it to path.
func WriteFile(path string, c Config) error {
	w, err := Build(c)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// setVocab writes a SentencePiece vocabulary: <unk>, <s>, </s>, the byte
// tokens, then pieces "▁a".."▁z" and filler.
func setVocab(w *gguf.Writer, n int) {
	toks := make([]string, 0, n)
	types := make([]int32, 0, n)
	scores := make([]float32, 0, n)
	push := func(s string, t int32, score float32) {
		toks, types, scores = append(toks, s), append(types, t), append(scores, score)
	}
	push("<unk>", 2, 0)
	push("<s>", 3, 0)
	push("</s>", 3, 0)
	for b := 0; b < 256; b++ {
		push(fmt.Sprintf("<0x%02X>", b), 6, 0)
	}
	for c := 'a'; c <= 'z' && len(toks) < n; c++ {
		push("▁"+string(c), 1, -float32(len(toks)))
	}
	for i := 0; len(toks) < n; i++ {
		push(fmt.Sprintf("▁w%d", i), 1, -float32(len(toks)))
	}
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.tokens", toks)
	w.Set("tokenizer.ggml.scores", scores)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(0))
}

// Dequantized returns a copy of f with every tensor stored as F32 (the
// values its quantized tensors decode to), for comparing kernels of a type
// against plain float32 arithmetic on the same numbers.
func Dequantized(f *gguf.File) (*gguf.File, error) {
	w := gguf.NewWriter()
	for _, k := range f.Keys {
		w.Set(k, f.Metadata[k])
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.Data(ti)
		if err != nil {
			return nil, err
		}
		vals := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, data, vals); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", ti.Name, err)
		}
		raw, err := quant.Quantize(gpu.F32, vals)
		if err != nil {
			return nil, err
		}
		if err := w.AddTensor(ti.Name, gpu.F32, ti.Dims, raw); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return gguf.Parse(buf.Bytes())
}

// rowFallback is the type a row of cols values is stored in when t's
// blocks do not divide it, as llama.cpp's quantizer falls back (a K-quant
// needs rows of whole 256-value super-blocks: Gemma 3 270M's width of 640
// is not one): Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to
// Q8_0; t itself when its blocks fit.
func rowFallback(t gpu.DType, cols int) gpu.DType {
	if cols%t.BlockSize() == 0 {
		return t
	}
	switch t {
	case gpu.Q2_K, gpu.Q3_K:
		return gpu.Q4_0
	case gpu.Q4_K:
		return gpu.Q5_0
	case gpu.Q5_K:
		return gpu.Q5_1
	case gpu.Q6_K:
		return gpu.Q8_0
	}
	return t
}
