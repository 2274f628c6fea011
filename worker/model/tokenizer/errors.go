package tokenizer

import "errors"

// ErrUnsupportedModel is returned by FromGGUF when tokenizer.ggml.model names
// a tokenizer type this package does not implement (it implements "llama" and
// "gpt2"). The error text names the type.
var ErrUnsupportedModel = errors.New("tokenizer: unsupported tokenizer model")

// ErrUnsupportedPre is returned by FromGGUF when tokenizer.ggml.pre names a
// pre-tokenizer this package does not implement. The error text names it.
var ErrUnsupportedPre = errors.New("tokenizer: unsupported pre-tokenizer")

// ErrMissingKey is returned by FromGGUF when a required metadata key
// (tokenizer.ggml.model, tokenizer.ggml.tokens, or tokenizer.ggml.merges for
// "gpt2") is absent or has the wrong type. The error text names the key.
var ErrMissingKey = errors.New("tokenizer: missing metadata key")

// ErrInvalidVocab is returned by FromGGUF for tokenizer metadata that
// contradicts itself, such as a scores or token-type array whose length is
// not the number of tokens, or an empty vocabulary.
var ErrInvalidVocab = errors.New("tokenizer: invalid vocabulary")
