package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// BERTSmall is a small BERT encoder for tests and comparisons (dim 128,
// hidden 512, 4 layers, 4 heads, context 512, cls pooling as bge's files
// say) over the synthetic WordPiece vocabulary, weights of type t.
func BERTSmall(t gpu.DType) Config {
	return Config{Arch: "bert", Dim: 128, Hidden: 512, Layers: 4, Heads: 4, Context: 512, Type: t, EmbedType: t, Pooling: 2}
}

// buildEncoder writes a BERT-family encoder with llama.cpp's tensor and
// key names (convert_hf_to_gguf.py's BertModel and NomicBertModel):
// token, type and (bert) position embeddings with a LayerNorm, then per
// layer separate Q/K/V with biases (nomic-bert: a fused attn_qkv without
// biases), the attention output and its LayerNorm, the feed-forward (bert:
// up and down with biases; nomic-bert: gate, up and down) and the output
// LayerNorm. Config.Tokens, or WordPieceVocab(Config.Vocab), is the
// vocabulary; Vocab, KVHeads, HeadDim, Window and Tied are ignored.
func buildEncoder(c Config) (*gguf.Writer, error) {
	a := c.Arch
	if c.Context == 0 {
		c.Context = 512
	}
	if c.EmbedType == 0 && c.Type != 0 {
		c.EmbedType = c.Type
	}
	if c.Pooling == 0 {
		c.Pooling = 2
		if a == "nomic-bert" {
			c.Pooling = 1
		}
	}
	if c.Dim <= 0 || c.Hidden <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Dim%c.Heads != 0 {
		return nil, fmt.Errorf("synth: bad encoder shape %+v", c)
	}
	toks := c.Tokens
	if toks == nil {
		toks = WordPieceVocab(c.Vocab)
	}
	w := gguf.NewWriter()
	setShape(w, c)
	w.Set(a+".attention.layer_norm_epsilon", float32(1e-12))
	w.Set(a+".attention.causal", false)
	w.Set(a+".pooling_type", c.Pooling)
	if a == "nomic-bert" {
		base := c.RopeBase
		if base == 0 {
			base = 1000 // nomic-embed-text's
		}
		w.Set(a+".rope.freq_base", base)
	}
	if err := setWordPiece(w, toks); err != nil {
		return nil, err
	}

	tw := &tensorWriter{w: w, r: rand.New(rand.NewPCG(c.Seed, 0xbe57)), types: c.Types}
	d, h := c.Dim, c.Hidden
	s := 1 / math.Sqrt(float64(d))
	bias := func(name string, n int) { tw.add(name, gpu.F32, 1, n, 0.1) }
	layerNorm := func(name string) {
		tw.norm(name+".weight", d)
		bias(name+".bias", d)
	}
	tw.add("token_embd.weight", c.EmbedType, len(toks), d, 1)
	tw.add("token_types.weight", gpu.F32, 2, d, 0.1)
	if a == "bert" {
		tw.add("position_embd.weight", c.EmbedType, c.Context, d, 0.5)
	}
	layerNorm("token_embd_norm")
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if a == "nomic-bert" {
			tw.add(p+"attn_qkv.weight", c.Type, 3*d, d, s)
			tw.add(p+"attn_output.weight", c.Type, d, d, s)
		} else {
			for _, m := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
				tw.add(p+m+".weight", c.Type, d, d, s)
				bias(p+m+".bias", d)
			}
		}
		layerNorm(p + "attn_output_norm")
		tw.add(p+"ffn_up.weight", c.Type, h, d, s)
		if a == "nomic-bert" {
			tw.add(p+"ffn_gate.weight", c.Type, h, d, s)
		} else {
			bias(p+"ffn_up.bias", h)
		}
		tw.add(p+"ffn_down.weight", c.Type, d, h, 1/math.Sqrt(float64(h)))
		if a == "bert" {
			bias(p+"ffn_down.bias", d)
		}
		layerNorm(p + "layer_output_norm")
	}
	if tw.err != nil {
		return nil, fmt.Errorf("synth: %w", tw.err)
	}
	return w, nil
}

// wordPieceSpecials are the control tokens of a BERT vocabulary, at the
// ids BERT's uncased files (and llama.cpp's defaults) give them.
var wordPieceSpecials = map[string]int{"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}

// setWordPiece writes a "bert" tokenizer: the tokens, their types
// (control for the specials) and the special ids as llama.cpp's
// converter names them.
func setWordPiece(w *gguf.Writer, toks []string) error {
	types := make([]int32, len(toks))
	ids := map[string]int{}
	for i, s := range toks {
		types[i] = 1
		if _, ok := wordPieceSpecials[s]; ok {
			types[i] = 3
			ids[s] = i
		}
	}
	for s := range wordPieceSpecials {
		if _, ok := ids[s]; !ok {
			return fmt.Errorf("synth: the vocabulary has no %s", s)
		}
	}
	w.Set("tokenizer.ggml.model", "bert")
	w.Set("tokenizer.ggml.tokens", toks)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.token_type_count", uint32(2))
	w.Set("tokenizer.ggml.bos_token_id", uint32(ids["[CLS]"]))
	w.Set("tokenizer.ggml.cls_token_id", uint32(ids["[CLS]"]))
	w.Set("tokenizer.ggml.seperator_token_id", uint32(ids["[SEP]"]))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(ids["[UNK]"]))
	w.Set("tokenizer.ggml.padding_token_id", uint32(ids["[PAD]"]))
	w.Set("tokenizer.ggml.mask_token_id", uint32(ids["[MASK]"]))
	return nil
}

// WordPieceVocab returns a WordPiece vocabulary in llama.cpp's convention
// of at least n tokens: the specials at BERT's ids ([unusedN] between),
// ASCII punctuation and symbols as words, every lowercase letter and digit
// of several scripts (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari,
// kana, Hangul leading jamo) both starting a word ("▁a") and continuing
// one ("a"), a few English words and suffixes, the first 512 CJK
// ideographs and some common ones, then filler words up to n.
func WordPieceVocab(n int) []string {
	toks := make([]string, 104)
	for i := range toks {
		toks[i] = fmt.Sprintf("[unused%d]", i)
	}
	for s, id := range wordPieceSpecials {
		toks[id] = s
	}
	seen := map[string]bool{}
	for _, s := range toks {
		seen[s] = true
	}
	push := func(s string) {
		if !seen[s] {
			seen[s] = true
			toks = append(toks, s)
		}
	}
	for c := '!'; c <= '~'; c++ {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z') {
			push("▁" + string(c))
		}
	}
	for _, w := range []string{"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world",
		"a", "an", "is", "of", "and", "to", "in", "it", "that", "this", "search", "query", "document", "embed"} {
		push("▁" + w)
	}
	for _, w := range []string{"ing", "ed", "er", "ly", "s", "es", "tion", "ment"} {
		push(w)
	}
	letters := func(lo, hi rune) {
		for c := lo; c <= hi; c++ {
			push("▁" + string(c))
			push(string(c))
		}
	}
	letters('a', 'z')
	letters('0', '9')
	for _, c := range "ßæøðþłđ" {
		letters(c, c)
	}
	letters('а', 'я')           // Cyrillic
	letters('α', 'ω')           // Greek
	letters('\u0621', '\u064a') // Arabic
	letters('א', 'ת')           // Hebrew
	letters('\u0905', '\u094d') // Devanagari letters and signs
	letters('\u3041', '\u3096') // Hiragana
	letters('\u30a1', '\u30fa') // Katakana
	letters('\u1100', '\u1112') // Hangul leading jamo, the first of a syllable's decomposition
	for c := rune(0x4e00); c < 0x4e00+512; c++ {
		push("▁" + string(c))
	}
	for _, c := range "中文日本語国学好界们的是我有这个来说，。、！？：；（）「」" {
		push("▁" + string(c))
	}
	for i := 0; len(toks) < n; i++ {
		push(fmt.Sprintf("▁w%d", i))
	}
	return toks
}
