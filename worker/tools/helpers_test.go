package tools

import (
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// sharedDir returns the shared test data folder, or skips the test.
func sharedDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join("..", "..", "..", "shared")
	if _, err := os.Stat(d); err != nil {
		t.Skip("shared test data not present:", err)
	}
	return d
}

var llama struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
}

// llamaVocab returns the 32k-token llama2-tiny-random tokenizer, or skips.
func llamaVocab(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := sharedDir(t)
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

// byteTokens maps each byte to a token whose piece is that single byte.
func byteTokens(t testing.TB, v Vocab) [256]int32 {
	t.Helper()
	var out [256]int32
	for i := range out {
		out[i] = -1
	}
	for id := int32(0); int(id) < v.VocabSize(); id++ {
		p := v.Piece(id)
		if len(p) == 1 && out[p[0]] < 0 {
			out[p[0]] = id
		}
	}
	return out
}

// feed accepts ids into r, checking each against the mask when check is
// set; it reports whether every token was allowed and the end is allowed.
func feed(r *Run, vi *vocab.Index, ids []int32, check bool) (bool, error) {
	mask := make([]uint64, vi.Words)
	for _, id := range ids {
		if check {
			if _, err := r.Mask(mask); err != nil {
				return false, err
			}
			if !vocab.MaskHas(mask, id) {
				return false, nil
			}
		}
		if err := r.Accept(id); err != nil {
			return false, nil
		}
	}
	if check {
		if _, err := r.Mask(mask); err != nil {
			return false, err
		}
		if len(vi.EOG) > 0 && !vocab.MaskHas(mask, vi.EOG[0]) {
			return false, nil
		}
	}
	return r.CanEnd(), nil
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }
