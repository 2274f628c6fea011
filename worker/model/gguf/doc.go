// Package gguf reads and writes GGUF model files (versions 2 and 3): the
// header, typed metadata, tensor infos and the aligned tensor data.
//
// Open memory-maps the file, so loading a model costs no copy: weight
// matrices handed to a backend alias the mapping until Close. Every count
// and length read from the file is checked against the bytes that remain
// before anything is allocated, so truncated or hostile files give an error
// wrapping ErrFormat, never a panic or an unbounded allocation.
//
// Writer builds files; tests use it to generate tiny models of any shape and
// tensor type.
//
//	f, err := gguf.Open("stories260K.gguf")
//	arch := f.Architecture()             // "llama"
//	ti, _ := f.Tensor("token_embd.weight") // Dims [64, 512]: 512 rows of 64
//	data, err := f.Data(ti)
//
// It imports gpu (for DType) and nothing else of ours.
package gguf
