package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// Merging word by word must give exactly what merging the whole text at
// once gives (llama.cpp's way) when the vocabulary allows it.
func TestSPMWordsMatchWholeText(t *testing.T) {
	t.Parallel()
	for _, vocab := range []string{vocabSPM, stories} {
		tok := loadShared(t, vocab)
		if !tok.spmWords {
			t.Fatalf("%s: expected no token with U+2581 after another character", vocab)
		}
		texts := append([]string{benchText(4 << 10)}, roundTripTexts...)
		for _, c := range readVocabCases(t, vocabSPM) {
			texts = append(texts, c.text)
		}
		for _, s := range texts {
			sc := new(scratch)
			got := tok.spmEncode(nil, s, true, sc)
			esc := []byte(spaceMark + strings.ReplaceAll(s, " ", spaceMark))
			want := tok.spmMerge(nil, esc, sc)
			if !slices.Equal(got, want) {
				t.Errorf("%s %q: word by word %v, whole text %v", vocab, s, got, want)
			}
		}
	}
}

func TestSPMWordsOK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tokens []string
		want   bool
	}{
		{[]string{"▁the", "▁▁", "▁▁▁▁", "a", "<0x20>"}, true},
		{[]string{"▁the", "a▁"}, false},
		{[]string{"▁▁a▁b"}, false},
	}
	for _, tt := range tests {
		if got := spmWordsOK(tt.tokens); got != tt.want {
			t.Errorf("spmWordsOK(%q) = %v, want %v", tt.tokens, got, tt.want)
		}
	}
}
