package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// roundTripTexts are inputs beyond llama.cpp's vectors: invalid UTF-8,
// spaces at the edges, U+2581 itself, long runs.
var roundTripTexts = []string{
	"",
	" ",
	"  leading and trailing  ",
	"\xff\xfe raw bytes \x80",
	"\xc3 space after a cut lead byte",
	"half an emoji \xf0\x9f\xa6",
	"日本語 中文 한국어",
	"emoji 🦙🚀😶\u200d🌫\ufe0f zwj",
	"tabs\t\tand\r\nnewlines\n\n\n",
	"<s> </s> <unk> <|endoftext|> <0x0A> as plain text",
	"don't I'LL we've",
	strings.Repeat("ab", 300),
	"\x00\x01\x7f control bytes",
}

// spmRoundTrip is the text Decode(Encode(s)) gives for a SentencePiece
// vocabulary with a space prefix: s itself, except that an input U+2581 reads
// back as a space (Encode writes every space as U+2581).
func spmRoundTrip(s string) string { return strings.ReplaceAll(s, spaceMark, " ") }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	texts := append([]string{}, roundTripTexts...)
	texts = append(texts, "▁ U+2581 in the input ▁▁")
	for _, c := range readVocabCases(t, vocabSPM) {
		texts = append(texts, c.text)
	}
	tests := []struct {
		vocab string
		want  func(string) string
	}{
		{vocabSPM, spmRoundTrip},
		{stories, spmRoundTrip},
		{vocabGPT2, func(s string) string { return s }},
	}
	for _, tt := range tests {
		tok := loadShared(t, tt.vocab)
		for _, s := range texts {
			for _, o := range []EncodeOptions{{}, {AddSpecial: true}} {
				ids := tok.Encode(s, o)
				if got := tok.Decode(ids); got != tt.want(s) {
					t.Errorf("%s %+v: Decode(Encode(%q)) = %q", tt.vocab, o, s, got)
				}
				for _, id := range ids {
					if tok.TokenType(id) == TypeControl && id != tok.BOS() && id != tok.EOS() {
						t.Errorf("%s: Encode(%q) without ParseSpecial gave control token %d", tt.vocab, s, id)
					}
				}
			}
		}
	}
}

// FuzzRoundTrip checks, for arbitrary bytes, that encoding never panics,
// yields ids in range and no control token the text did not ask for, and
// that decoding gives the input back: exactly for GPT-2, and for
// SentencePiece up to U+2581, which reads back as a space (see
// spmRoundTrip). With AddSpecial the SentencePiece result starts with BOS.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add([]byte(s))
	}
	spm := loadShared(f, vocabSPM)
	gpt2 := loadShared(f, vocabGPT2)
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		for _, tc := range []struct {
			tok  *Tokenizer
			want string
		}{{spm, spmRoundTrip(s)}, {gpt2, s}} {
			for _, o := range []EncodeOptions{{}, {AddSpecial: true}} {
				ids := tc.tok.Encode(s, o)
				for i, id := range ids {
					if id < 0 || int(id) >= tc.tok.VocabSize() {
						t.Fatalf("%s: id %d out of range", tc.tok.Model(), id)
					}
					if tc.tok.TokenType(id) == TypeControl && !(o.AddSpecial && i == 0 && id == tc.tok.BOS()) {
						t.Fatalf("%s: Encode(%q, %+v) gave control token %d at %d", tc.tok.Model(), s, o, id, i)
					}
				}
				if got := tc.tok.Decode(ids); got != tc.want {
					t.Fatalf("%s %+v: Decode(Encode(%q)) = %q, want %q", tc.tok.Model(), o, s, got, tc.want)
				}
				// The streaming decoder must agree and cut only between
				// characters when the input is valid UTF-8.
				d := tc.tok.NewDecoder()
				var sb strings.Builder
				for _, id := range ids {
					chunk := d.Add(id)
					if utf8.ValidString(s) && !utf8.ValidString(chunk) {
						t.Fatalf("%s: chunk %q of valid input %q is not valid UTF-8", tc.tok.Model(), chunk, s)
					}
					sb.WriteString(chunk)
				}
				sb.WriteString(d.Flush())
				if sb.String() != tc.want {
					t.Fatalf("%s: streamed %q, want %q", tc.tok.Model(), sb.String(), tc.want)
				}
			}
		}
	})
}

// A Tokenizer is shared by every request of a worker.
func TestConcurrentEncode(t *testing.T) {
	t.Parallel()
	for _, vocab := range []string{vocabSPM, vocabGPT2} {
		tok := loadShared(t, vocab)
		text := benchText(2 << 10)
		want := tok.Encode(text, EncodeOptions{AddSpecial: true})
		done := make(chan []int32)
		for range 4 {
			go func() { done <- tok.Encode(text, EncodeOptions{AddSpecial: true}) }()
		}
		for range 4 {
			if got := <-done; !slices.Equal(got, want) {
				t.Errorf("%s: concurrent Encode differs", vocab)
			}
		}
	}
}
