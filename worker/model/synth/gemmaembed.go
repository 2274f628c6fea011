package synth

import (
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// EmbeddingGemmaSmall is a small gemma-embedding (EmbeddingGemma's
// architecture) for tests and comparisons: dim 128, hidden 384, 4 layers
// of which the third is global (Period 3), 4 heads over 2 KV heads of 48,
// a sliding window of 24 (12 positions each side, well under the longer
// test inputs), dense projections 128→512→128, context 1024 (the byte tokens of
// scripts its vocabulary lacks make long inputs), mean pooling,
// weights of type t.
func EmbeddingGemmaSmall(t gpu.DType) Config {
	return Config{Arch: "gemma-embedding", Dim: 128, Hidden: 384, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 48,
		Vocab: 512, Context: 1024, Window: 24, Period: 3, Dense: 512, RopeBase: 1e6, Tied: true, Type: t, EmbedType: t}
}

// setGemmaEmbedding writes what gemma-embedding adds to gemma3's file,
// in llama.cpp's names (convert_hf_to_gguf.py's EmbeddingGemma): the
// pooling (Config.Pooling, default mean), the global-layer period, a
// local RoPE base of 20000 (rope.freq_base_swa, so that a reader that
// ignores it differs), the dense projections (Config.Dense), and the
// tokenizer flags of Gemma's files: <s> and </s> around every input, no
// space prefix. There is no output head.
func setGemmaEmbedding(w *gguf.Writer, tw *tensorWriter, c Config) {
	a := c.Arch
	pool := c.Pooling
	if pool == 0 {
		pool = 1
	}
	w.Set(a+".pooling_type", pool)
	if c.Period > 0 {
		w.Set(a+".attention.sliding_window_pattern", uint32(c.Period))
	}
	w.Set(a+".rope.freq_base_swa", float32(20000))
	w.Set("tokenizer.ggml.add_bos_token", true)
	w.Set("tokenizer.ggml.add_eos_token", true)
	w.Set("tokenizer.ggml.add_space_prefix", false)
	if c.Dense == 0 {
		return
	}
	w.Set(a+".dense_2_feat_in", uint32(c.Dim))
	w.Set(a+".dense_2_feat_out", uint32(c.Dense))
	w.Set(a+".dense_3_feat_in", uint32(c.Dense))
	w.Set(a+".dense_3_feat_out", uint32(c.Dim))
	tw.add("dense_2.weight", c.Type, c.Dense, c.Dim, 1/math.Sqrt(float64(c.Dim)))
	tw.add("dense_3.weight", c.Type, c.Dim, c.Dense, 1/math.Sqrt(float64(c.Dense)))
}
