// Package tokenizer turns text into token ids and back for the vocabularies
// stored in GGUF files, with llama.cpp's semantics, so that a prompt gets the
// same ids here as under llama.cpp.
//
// FromGGUF reads the tokenizer.ggml.* metadata and builds one of three
// tokenizers, chosen by tokenizer.ggml.model:
//
//   - "llama": SentencePiece-style BPE (Llama 1 and 2, Mistral, TinyLlama,
//     Gemma). Spaces become U+2581 ("▁"), a space is put in front of the text
//     (tokenizer.ggml.add_space_prefix, default true; Gemma's files set it
//     false, so there text is taken as it is), then adjacent pieces
//     are merged, always the pair whose concatenation is the vocabulary token
//     with the highest score (leftmost on ties). Bytes that no token covers
//     become "<0xXX>" byte tokens, or the unknown token if there are none.
//   - "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen 2 and 3, SmolLM). A
//     pre-tokenizer chosen by tokenizer.ggml.pre cuts the text into words;
//     each byte of a word is replaced by a printable character of the GPT-2
//     alphabet, and pairs are merged in the order of tokenizer.ggml.merges.
//   - "bert": WordPiece, llama.cpp's WPM (bge, all-MiniLM, e5). Each
//     character is replaced by the first of its canonical decomposition
//     (accents dropped) and lowercased; white space and control
//     characters go; punctuation, ASCII symbols and CJK ideographs are
//     words of their own. Each word, behind a U+2581, is covered by the
//     longest vocabulary pieces from the left (continuations are bare, as
//     llama.cpp's converter writes "##ing"), or is the unknown token
//     whole. AddSpecial puts [CLS] first and [SEP] last.
//
// The pre-tokenizers are the regexes llama.cpp uses, hand-written as
// scanners (Go's regexp lacks the lookahead of \s+(?!\S)). Where there are
// several, each cuts the pieces of the one before, and text between matches
// stays a piece of its own:
//
//	gpt-2, phi-2, mpt, olmo, ...       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//	llama3, llama-bpe, dbrx, ...       (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	                                   ' ?[^\s\p{L}\p{N}]+[\r\n]*'|\s*[\r\n]+|\s+(?!\S)|\s+
//	qwen2, deepseek-r1-qwen, ...       as llama3, with \p{N} in place of \p{N}{1,3}
//	smollm, starcoder, command-r, ...  \p{N}, then gpt-2
//	falcon                             [\p{P}$+<=>^~|`]+, then gpt-2, then [0-9]{3}
//	default (also when there is none)  [\p{P}$+<=>^~|]+, then gpt-2, then \p{N}+, then [0-9]{3}
//
// Special tokens are matched as whole texts before any merging: control
// tokens (Gemma's "<bos>", "<start_of_turn>"; Qwen's "<|im_start|>",
// "<|im_end|>") only with EncodeOptions.ParseSpecial, user-defined ones
// (Qwen3's "<think>", "</think>", "<tool_call>") always. A 262,144-entry
// vocabulary such as Gemma 3's builds in a fraction of a second.
//
// PreTokenizers lists every accepted name; another name is refused with
// ErrUnsupportedPre rather than tokenized wrongly.
//
// Data flows one way on each side. Encoding: text → special-token split
// (EncodeOptions.ParseSpecial) → per fragment, SentencePiece merging or
// pre-tokenizer plus BPE → ids, with BOS/EOS added when
// EncodeOptions.AddSpecial and the vocabulary ask for them. Decoding: id →
// piece bytes (Piece) → text; Decode does a whole sequence, a StreamDecoder
// one generated token at a time without ever splitting a UTF-8 character.
// Merging uses a priority queue over adjacent pairs and a linked list of
// symbols, so encoding is O(n log n) in the input length.
//
// A Tokenizer is immutable and safe for concurrent use.
//
//	f, _ := gguf.Open("stories260K.gguf")
//	tok, err := tokenizer.FromGGUF(f)
//	ids := tok.Encode("Once upon a time", tokenizer.EncodeOptions{AddSpecial: true})
//	// ids: [1 403 407 261 378]
//	dec := tok.NewDecoder()
//	for _, id := range generated {
//		fmt.Print(dec.Add(id))
//	}
//	fmt.Print(dec.Flush())
//
// Differences from llama.cpp, all at the edges (none shows in llama.cpp's
// own test vectors, which pass unchanged):
//   - Invalid UTF-8 is carried through as bytes. llama.cpp turns such bytes
//     into U+FFFD before byte-level BPE, and its SentencePiece splitter sizes
//     a character by its first byte alone, which can swallow the next one.
//   - Merging never produces a control, unknown or byte token from plain
//     text, so text can only become a control token through ParseSpecial.
//   - Special tokens are found leftmost-longest; llama.cpp splits on the
//     longest texts first, which differs only when two special texts
//     overlap. The lstrip/rstrip attributes llama.cpp sets for a few models
//     by name are not applied.
//   - Decode drops the SentencePiece space after any BOS (llama.cpp only at
//     the very start, and not after a BOS it removes), and never applies "clean_spaces", so that decoding inverts encoding.
//   - A "gpt2" vocabulary without BOS/EOS ids has none (llama.cpp assumes
//     11); an unrecognised tokenizer.ggml.pre is an error, not "default".
//   - A BPE symbol that is not a token falls back to one token per byte.
//
// It imports gguf and nothing else of ours.
package tokenizer
