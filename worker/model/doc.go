// Package model loads Llama-family transformers from GGUF files and runs
// their forward pass on a gpu.Backend.
//
// Supported architectures are "llama" (Llama 2 and 3, TinyLlama, SmolLM,
// Mistral without sliding window), "qwen2" (biases on Q, K and V, NeoX
// rotary layout), "qwen3" (per-head RMSNorm of Q and K, head size from
// attention.key_length) and "gemma3" (qwen3's Q/K norms, embeddings scaled
// by √dim, GELU-tanh feed-forward, norms after attention and feed-forward,
// five sliding-window layers with RoPE base 10000 in every six, tied
// classifier). qwen3 and gemma3 need a backend with gpu.ArchOps.
//
// The BERT encoder family, "bert" (bge, all-MiniLM, e5: absolute
// positions, biases, GELU) and "nomic-bert" (rotary positions, fused QKV,
// SwiGLU, no biases), only embeds (Config.Encoder; see bert.go): each
// input is computed whole by ForwardHidden with bidirectional attention
// (its K and V in the arena for that call only), post-LayerNorm layers,
// no final norm; asked for logits it returns ErrEncoderOnly.
// "gemma-embedding" (EmbeddingGemma) runs gemma3's layers the same way, as
// an encoder (see gemmaembed.go): global layers see the whole input,
// sliding ones a window symmetric about each position, and Project
// applies the file's dense projections to a pooled vector.
//
// The forward pass is batched over rows of several sequences at once: each step embeds the rows' tokens, runs every layer
// (RMSNorm, Q/K/V projections, RoPE, writing K and V into the paged cache,
// grouped-query attention over each row's own sequence, output projection,
// SwiGLU feed-forward) and computes logits only for the rows that need them
// (the last prompt row of a prefill, every decode row).
//
// Sub-packages hold the pieces around the network: gguf (the file format),
// tokenizer (SentencePiece and byte-level BPE from GGUF metadata) and chat
// (chat templates).
//
//	f, _ := gguf.Open(path)
//	m, _ := model.New(f, cpu.New(cpu.Config{}))
//	kv, _ := m.NewKV(64, 16)
//	err := m.Forward(kv, ids, &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}, []int32{int32(len(ids) - 1)}, logits)
//
// It imports the gpu seam, gpu/quant and gguf; never a concrete backend, the
// engine or anything above it.
package model
