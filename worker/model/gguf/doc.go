// Package gguf reads and writes GGUF model files (versions 2 and 3): the
// header, typed metadata, tensor infos and the aligned tensor data.
//
// Open memory-maps the file, so loading a model costs no copy: weight
// matrices handed to a backend alias the mapping until Close. Every count
// and length read from the file is checked against the bytes that remain
// before anything is allocated, so truncated or hostile files give an error
// wrapping ErrFormat, never a panic or an unbounded allocation.
//
// A split model (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf holding
// the metadata, each file some of the tensors) opens as one File from its
// first file; a missing file is an error wrapping ErrMissingShard that names
// it. general.alignment (default 32) places every file's tensor data.
//
// Writer builds files (WriteSplit as gguf-split does); tests use it to generate tiny models of any shape and
// tensor type.
//
//	f, err := gguf.Open("stories260K.gguf")
//	arch := f.Architecture()             // "llama"
//	ti, _ := f.Tensor("token_embd.weight") // Dims [64, 512]: 512 rows of 64
//	data, err := f.Data(ti)
//
// It imports gpu (for DType) and nothing else of ours.
package gguf
