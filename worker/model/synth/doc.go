// Package synth generates Llama-shaped GGUF models with random weights, in
// any supported tensor type, for tests and benchmarks: the 134M-parameter
// benchmark shape, or tiny models that exercise every code path in
// milliseconds. The vocabulary is a valid SentencePiece-style one (control
// tokens, the 256 byte tokens, then filler pieces), so generated models
// load, tokenize and generate like downloaded ones. Encoders ("bert",
// "nomic-bert": BERTSmall) get a WordPiece vocabulary instead
// (WordPieceVocab, or Config.Tokens), in llama.cpp's tensor and key names
// so that llama.cpp's llama-embedding runs the same file; so does
// gemma-embedding (EmbeddingGemmaSmall: gemma3's layers and vocabulary,
// with dense projections after pooling).
//
// It imports the gpu seam, gpu/quant and gguf; tests and benchmarks import
// it.
package synth
