package tokenizer

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// benchText returns about n bytes of varied text: English prose with
// numbers, punctuation, code, newlines, and some CJK and emoji that need
// byte tokens.
func benchText(n int) string {
	words := strings.Fields(`Once upon a time there was a little girl named Lily who loved to play
		outside in the park with her big red ball and her friends Tom and Sue, they're happy;
		it's 12:30 on 2024-06-05 and 3.14159 × 42 = 131.95 (roughly) — naïve café crème
		func main() { fmt.Println("hello, world") } x += y[i] * 2 // comment
		日本語 中文 한국어 Български 🦙 🚀 😁`)
	r := rand.New(rand.NewSource(1))
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[r.Intn(len(words))])
		switch r.Intn(12) {
		case 0:
			sb.WriteString("\n")
		case 1:
			sb.WriteString(".  ")
		default:
			sb.WriteString(" ")
		}
	}
	return sb.String()
}

// BenchmarkEncode encodes about 50 KB per iteration.
func BenchmarkEncode(b *testing.B) {
	const size = 50 << 10
	inputs := []struct {
		name string
		text string
	}{
		{"prose", benchText(size)},
		{"one-word", strings.Repeat("abcdefghij", size/10)},
		{"spaces", strings.Repeat(" ", size)},
	}
	for _, vocab := range []string{vocabSPM, vocabGPT2} {
		tok := loadShared(b, vocab)
		for _, in := range inputs {
			b.Run(fmt.Sprintf("%s/%s", tok.Model(), in.name), func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				var n int
				for b.Loop() {
					n = len(tok.Encode(in.text, EncodeOptions{AddSpecial: true}))
				}
				b.ReportMetric(float64(n), "tokens/op")
			})
		}
	}
}

// BenchmarkDecode decodes the tokens of about 50 KB of text.
func BenchmarkDecode(b *testing.B) {
	text := benchText(50 << 10)
	for _, vocab := range []string{vocabSPM, vocabGPT2} {
		tok := loadShared(b, vocab)
		ids := tok.Encode(text, EncodeOptions{})
		b.Run(tok.Model(), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				_ = tok.Decode(ids)
			}
		})
	}
}
