package toolstest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// SharedDir returns the shared test data folder (../shared beside the
// repository), or skips the test when it is absent.
func SharedDir(t testing.TB) string {
	t.Helper()
	// A test runs in its package's folder: walk up to the module root.
	dir, err := os.Getwd()
	for err == nil {
		if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			err = os.ErrNotExist
		}
		dir = up
	}
	d := filepath.Join(dir, "..", "shared")
	if err == nil {
		_, err = os.Stat(d)
	}
	if err != nil {
		t.Skip("shared test data not present:", err)
	}
	return d
}

var llama struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
}

// LlamaVocab returns the 32k-token llama2-tiny-random tokenizer, loaded
// once per process, or skips the test when it is not available.
func LlamaVocab(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := SharedDir(t)
	llama.once.Do(func() {
		f, err := gguf.Open(filepath.Join(dir, "models", "llama2-tiny-random", "llama-2-tiny-random.gguf"))
		if err != nil {
			llama.err = err
			return
		}
		defer f.Close()
		llama.tok, llama.err = tokenizer.FromGGUF(f)
	})
	if llama.err != nil {
		t.Skip("llama tokenizer not available:", llama.err)
	}
	return llama.tok
}
