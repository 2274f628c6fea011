package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// streamTexts need byte tokens: CJK and emoji fall back to "<0xXX>" in the
// SentencePiece vocabularies and are split into byte-level pieces by GPT-2.
var streamTexts = []string{
	"日本語のテキスト",
	"emoji 🦙🚀😁 and 😶\u200d🌫\ufe0f",
	"mixed: naïve café, crème brûlée 🍰, Български",
	"ascii only, no held bytes",
}

func TestStreamDecoder(t *testing.T) {
	t.Parallel()
	for _, vocab := range []string{vocabSPM, stories, vocabGPT2} {
		tok := loadShared(t, vocab)
		for _, s := range streamTexts {
			ids := tok.Encode(s, EncodeOptions{AddSpecial: true})
			d := tok.NewDecoder()
			var chunks []string
			for _, id := range ids {
				c := d.Add(id)
				if !utf8.ValidString(c) {
					t.Errorf("%s %q: chunk %q after id %d ends inside a character", vocab, s, c, id)
				}
				chunks = append(chunks, c)
			}
			if rest := d.Flush(); rest != "" {
				t.Errorf("%s %q: Flush = %q after a complete text", vocab, s, rest)
			}
			if got, want := strings.Join(chunks, ""), tok.Decode(ids); got != want || got != s {
				t.Errorf("%s: streamed %q, Decode %q, want %q", vocab, got, want, s)
			}
		}
	}
}

// A held-back partial character stays held until it completes, and Flush
// hands over what never completed, raw; the decoder then starts afresh.
func TestStreamDecoderHoldsPartialCharacters(t *testing.T) {
	t.Parallel()
	tok := loadShared(t, stories)
	byteTok := func(b byte) int32 {
		id := tok.byteFallback[b]
		if tok.TokenType(id) != TypeByte {
			t.Fatalf("no byte token for %#x", b)
		}
		return id
	}
	// 🍰 is F0 9F 8D B0.
	d := tok.NewDecoder()
	for i, b := range []byte{0xF0, 0x9F, 0x8D} {
		if c := d.Add(byteTok(b)); c != "" {
			t.Fatalf("byte %d of 4: Add returned %q, want nothing yet", i+1, c)
		}
	}
	if c := d.Add(byteTok(0xB0)); c != "🍰" {
		t.Fatalf("last byte: Add returned %q, want the whole character", c)
	}
	// An invalid byte can never complete: it is passed on at once.
	if c := d.Add(byteTok(0xFF)); c != "\xff" {
		t.Errorf("invalid byte: Add returned %q, want it passed on", c)
	}
	if c := d.Add(byteTok(0xE6)); c != "" {
		t.Errorf("lead byte: Add returned %q, want it held", c)
	}
	if c := d.Flush(); c != "\xe6" {
		t.Errorf("Flush = %q, want the held lead byte", c)
	}
	// After Flush the next token is first again: its space prefix goes.
	once, _ := tok.Lookup("▁Once")
	if c := d.Add(once); c != "Once" {
		t.Errorf("after Flush: Add(▁Once) = %q, want %q", c, "Once")
	}
}

func TestCompletePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"a\xc3", 1},        // lead of a 2-byte character
		{"a\xc3\xa9", 3},    // é complete
		{"a\xe6\x97", 1},    // 2 of 3 bytes
		{"\xf0\x9f\x8d", 0}, // 3 of 4 bytes
		{"\xf0\x9f\x8d\xb0", 4},
		{"a\xff", 2},     // never valid
		{"a\xe0\x80", 3}, // E0 80 can never be completed
		{"\x80\x80\x80\x80", 4},
	}
	for _, tt := range tests {
		if got := completePrefix([]byte(tt.in)); got != tt.want {
			t.Errorf("completePrefix(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
