package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
)

// sharedDir is /work/shared seen from this package's directory.
const sharedDir = "../../../../shared"

// Fixture paths, relative to sharedDir.
const (
	vocabSPM     = "tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf"
	vocabGPT2    = "tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf"
	stories      = "models/stories260K/stories260K.gguf"
	storiesRef   = "models/stories260K/reference.json"
	tinyLlama2   = "models/llama2-tiny-random/llama-2-tiny-random.gguf"
	tinyLlamaRef = "models/llama2-tiny-random/reference.json"
)

// sharedPath returns the path of a fixture, skipping the test when the
// shared folder (or the file) is absent.
func sharedPath(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(sharedDir, filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("fixture %s not available (%v): the shared test data folder is absent", rel, err)
	}
	return p
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// loadShared builds (once per test binary) the tokenizer of a fixture GGUF.
func loadShared(tb testing.TB, rel string) *Tokenizer {
	tb.Helper()
	p := sharedPath(tb, rel)
	loadMu.Lock()
	defer loadMu.Unlock()
	if t, ok := loaded[rel]; ok {
		return t
	}
	f, err := gguf.Open(p)
	if err != nil {
		tb.Fatalf("open %s: %v", rel, err)
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		tb.Fatalf("FromGGUF(%s): %v", rel, err)
	}
	loaded[rel] = t
	return t
}

// synthetic builds a tokenizer from metadata given in the test.
func synthetic(tb testing.TB, md map[string]any) *Tokenizer {
	tb.Helper()
	t, err := FromGGUF(&gguf.File{Metadata: md})
	if err != nil {
		tb.Fatalf("FromGGUF: %v", err)
	}
	return t
}
