package tools

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Mask and compile times at real vocabulary sizes: the 32k llama
// tokenizer, the 50k GPT-2 tokenizer (llama.cpp's vocab-only GGUF), and a
// 256k vocabulary built from GPT-2 (its tokens, then deterministic
// concatenations of two of them). Run with
//
//	go test ./worker/tools -run '^$' -bench MaskVocab -benchtime 1x
//
// Each iteration compiles every jsonschemabench schema afresh (cold
// caches) and feeds its valid instances, timing every mask by the CPU time
// of the calling thread (the machines these run on are shared).

var gpt2 struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	big  *wideVocab
	err  error
}

// gpt2Vocab returns the GPT-2 tokenizer and the 256k vocabulary derived
// from it, or skips when ../shared is absent.
func gpt2Vocab(t testing.TB) (*tokenizer.Tokenizer, *wideVocab) {
	t.Helper()
	dir := toolstest.SharedDir(t)
	gpt2.once.Do(func() {
		f, err := gguf.Open(filepath.Join(dir, "tokenizers", "llamacpp-vocab", "ggml-vocab-gpt-2.gguf"))
		if err != nil {
			gpt2.err = err
			return
		}
		defer f.Close()
		if gpt2.tok, gpt2.err = tokenizer.FromGGUF(f); gpt2.err == nil {
			gpt2.big = newWideVocab(gpt2.tok, 256000)
		}
	})
	if gpt2.err != nil {
		t.Skip("gpt-2 tokenizer not available:", gpt2.err)
	}
	return gpt2.tok, gpt2.big
}

// wideVocab is a base tokenizer's tokens (same ids) followed by
// concatenations of two of its text tokens, up to size tokens: a stand-in
// for a 256k vocabulary whose extra tokens are plausible words and
// fragments. It is built deterministically.
type wideVocab struct {
	base   *tokenizer.Tokenizer
	pieces [][]byte
}

func newWideVocab(base *tokenizer.Tokenizer, size int) *wideVocab {
	n := base.VocabSize()
	v := &wideVocab{base: base, pieces: make([][]byte, 0, size)}
	seen := make(map[string]bool, size)
	var text []int32
	for id := int32(0); int(id) < n; id++ {
		p := base.Piece(id)
		v.pieces = append(v.pieces, p)
		seen[string(p)] = true
		if len(p) > 0 && !base.IsEOG(id) && base.TokenType(id) == tokenizer.TypeNormal {
			text = append(text, id)
		}
	}
	// A fixed linear congruential sequence picks the pairs.
	x := uint64(88172645463325252)
	next := func() int {
		x = x*6364136223846793005 + 1442695040888963407
		return int(x>>33) % len(text)
	}
	for len(v.pieces) < size {
		a, b := base.Piece(text[next()]), base.Piece(text[next()])
		if len(a)+len(b) > 24 {
			continue
		}
		p := append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
		if seen[string(p)] {
			continue
		}
		seen[string(p)] = true
		v.pieces = append(v.pieces, p)
	}
	return v
}

func (v *wideVocab) VocabSize() int        { return len(v.pieces) }
func (v *wideVocab) Piece(id int32) []byte { return v.pieces[id] }
func (v *wideVocab) IsEOG(id int32) bool {
	return int(id) < v.base.VocabSize() && v.base.IsEOG(id)
}

// TokenType keeps the base tokenizer's control tokens out of masks.
func (v *wideVocab) TokenType(id int32) tokenizer.TokenType {
	if int(id) < v.base.VocabSize() {
		return v.base.TokenType(id)
	}
	return tokenizer.TypeNormal
}

// BenchmarkMaskVocab reports mask p50/p99/max (µs, thread CPU time, cold
// caches: the schema's first pass), the same instances fed again (warm:
// a schema the compile cache keeps), and compile p50/p99 (ms) over
// jsonschemabench at 32k, 50k and 256k tokens.
func BenchmarkMaskVocab(b *testing.B) {
	files := loadBench(b)
	llama := toolstest.LlamaVocab(b)
	gtok, wide := gpt2Vocab(b)
	cases := []struct {
		name string
		v    Vocab
		enc  *tokenizer.Tokenizer
	}{
		{"32k", llama, llama},
		{"50k", gtok, gtok},
		{"256k", wide, gtok},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			Prepare(c.v)
			// The instances, tokenized once.
			inst := make([][][]int32, len(files))
			for i, bf := range files {
				for _, tc := range bf.Tests {
					if tc.Valid {
						inst[i] = append(inst[i], c.enc.Encode(encodeInstance(b, tc.Data), tokenizer.EncodeOptions{}))
					}
				}
			}
			var compileCPU, maskWall, maskCPU, warmCPU durStats
			rejected := 0
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				budget := Budget{CompileTimeout: 10*time.Second + time.Duration(n)} // a fresh cache key
				for i, bf := range files {
					c0 := threadCPU()
					set, err := Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator,
						Params: map[string]json.RawMessage{"schema": bf.Schema}}}, nil, c.v, budget)
					compileCPU = append(compileCPU, threadCPU()-c0)
					if err != nil {
						continue
					}
					for _, ids := range inst[i] {
						if !timedFeedCPU(b, set, ids, &maskWall, &maskCPU) {
							rejected++
						}
					}
					// The same instances again: caches warm, as for a
					// schema the compile cache keeps.
					for _, ids := range inst[i] {
						timedFeedCPU(b, set, ids, new(durStats), &warmCPU)
					}
				}
			}
			b.StopTimer()
			us := func(d time.Duration) float64 { return float64(d) / 1e3 }
			b.ReportMetric(us(maskCPU.pct(0.5)), "mask-p50-µs")
			b.ReportMetric(us(maskCPU.pct(0.99)), "mask-p99-µs")
			b.ReportMetric(us(maskCPU.pct(1)), "mask-max-µs")
			b.ReportMetric(us(warmCPU.pct(0.5)), "warm-p50-µs")
			b.ReportMetric(us(warmCPU.pct(0.99)), "warm-p99-µs")
			b.ReportMetric(us(maskWall.pct(0.5)), "mask-wall-p50-µs")
			b.ReportMetric(us(maskWall.pct(0.99)), "mask-wall-p99-µs")
			b.ReportMetric(us(compileCPU.pct(0.5))/1e3, "compile-p50-ms")
			b.ReportMetric(us(compileCPU.pct(0.99))/1e3, "compile-p99-ms")
			b.ReportMetric(float64(len(maskCPU))/float64(b.N), "masks/op")
			if rejected > 0 {
				// Instances tokenized by another tokenizer than the llama one
				// may split differently; they are counted, not failed.
				b.ReportMetric(float64(rejected)/float64(b.N), "rejected/op")
			}
		})
	}
}

// BenchmarkMaskInteger times one mask where an integer starts and one
// inside it (after a digit), plain and bounded, at 32k and 256k tokens:
// the bounded integer should cost what the plain one does.
func BenchmarkMaskInteger(b *testing.B) {
	llama := toolstest.LlamaVocab(b)
	_, wide := gpt2Vocab(b)
	schemas := []struct{ name, schema string }{
		{"plain", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`},
		{"bounded", `{"type":"object","properties":{"n":{"type":"integer","minimum":-40,"maximum":1000}},"required":["n"]}`},
		{"multipleOf", `{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":100000,"multipleOf":5}},"required":["n"]}`},
	}
	for _, v := range []struct {
		name string
		v    Vocab
	}{{"32k", llama}, {"256k", wide}} {
		Prepare(v.v)
		bt := byteTokens(b, v.v)
		for _, s := range schemas {
			set, err := Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator,
				Params: map[string]json.RawMessage{"schema": json.RawMessage(s.schema)}}}, nil, v.v, Budget{})
			if err != nil {
				b.Fatal(err)
			}
			for _, at := range []string{`{"n":`, `{"n":4`} {
				b.Run(v.name+"/"+s.name+"/"+at[len(at)-1:], func(b *testing.B) {
					r := set.NewRun()
					for i := 0; i < len(at); i++ {
						if err := r.Accept(bt[at[i]]); err != nil {
							b.Fatal(err)
						}
					}
					mask := make([]uint64, set.vi.Words)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := r.Mask(mask); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkPrepare times building the index of a vocabulary (once per
// tokenizer and process; Prepare does it ahead of the first Compile).
func BenchmarkPrepare(b *testing.B) {
	llama := toolstest.LlamaVocab(b)
	gtok, wide := gpt2Vocab(b)
	for _, c := range []struct {
		name string
		v    Vocab
	}{{"32k", llama}, {"50k", gtok}, {"256k", wide}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				// A copy is a new, uncached Source.
				vocab.IndexOf(&prepCopy{c.v})
			}
		})
	}
}

// prepCopy wraps a Vocab so that IndexOf does not find it cached.
type prepCopy struct{ Vocab }

func (p *prepCopy) TokenType(id int32) tokenizer.TokenType {
	if t, ok := p.Vocab.(interface {
		TokenType(int32) tokenizer.TokenType
	}); ok {
		return t.TokenType(id)
	}
	return tokenizer.TypeNormal
}
