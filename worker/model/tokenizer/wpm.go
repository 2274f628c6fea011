package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece ("bert" vocabularies), as llama.cpp's WPM tokenizer runs it.
//
// The vocabulary is the one llama.cpp's converter writes for BERT models:
// a piece that starts a word carries a leading U+2581 ("▁the"), a piece
// that continues one is bare ("ing", where the Hugging Face file said
// "##ing"). Text is cut into words, each word is prefixed with U+2581 and
// covered left to right by the longest pieces of the vocabulary; a word
// that cannot be covered whole becomes the unknown token.

// Default special ids of a "bert" vocabulary (BERT's uncased files), used
// when the metadata names none.
const (
	wpmCLS = 101
	wpmUNK = 100
	wpmSEP = 102
)

// loadWPM sets what WordPiece matching needs: the longest token text in
// bytes, which bounds the pieces tried at each position.
func (t *Tokenizer) loadWPM() {
	for _, s := range t.tokens {
		t.wpmMaxLen = max(t.wpmMaxLen, len(s))
	}
}

// wpmEncode appends the tokens of text. Words are made as llama.cpp's
// preprocess makes them: each character is replaced by the first
// character of its canonical decomposition (so "é" becomes "e", the
// accent dropped) and lowercased; white space ends a word; NUL, U+FFFD
// (invalid UTF-8 included) and other characters of category C are
// dropped; punctuation, ASCII symbols and CJK ideographs are words of
// their own.
func (t *Tokenizer) wpmEncode(out []int32, text string, sc *scratch) []int32 {
	// sc.buf holds the current word behind its U+2581 prefix.
	word := append(sc.buf[:0], spaceMark...)
	flush := func() {
		if len(word) > len(spaceMark) {
			out = t.wpmWord(out, word)
		}
		word = word[:len(spaceMark)]
	}
	for _, r := range text {
		r = nfdFirst(r)
		switch {
		case unicode.IsSpace(r):
			flush()
			continue
		case r == 0 || r == utf8.RuneError || isControl(r):
			continue
		}
		lower := unicode.ToLower(r)
		if unicode.IsPunct(r) || (r < 0x7f && unicode.IsSymbol(r)) || isCJK(r) {
			flush()
			word = utf8.AppendRune(word, lower)
			flush()
			continue
		}
		word = utf8.AppendRune(word, lower)
	}
	flush()
	sc.buf = word
	return out
}

// wpmWord appends the pieces of one word (U+2581 included): at each
// position the longest piece in the vocabulary; if some position has
// none, the whole word is the unknown token.
func (t *Tokenizer) wpmWord(out []int32, word []byte) []int32 {
	start := len(out)
	for i := 0; i < len(word); {
		found := false
		for j := min(len(word), i+t.wpmMaxLen); j > i; j-- {
			if id, ok := t.toID[string(word[i:j])]; ok {
				out = append(out, id)
				i, found = j, true
				break
			}
		}
		if !found {
			out = out[:start]
			break
		}
	}
	if len(out) == start && t.unk >= 0 {
		out = append(out, t.unk)
	}
	return out
}

// nfdFirst returns the first character of r's canonical decomposition (r
// itself when it has none), the single-character "NFD" llama.cpp applies.
func nfdFirst(r rune) rune {
	if r < 0xc0 {
		return r // nothing below U+00C0 decomposes
	}
	var in, buf [utf8.UTFMax * 4]byte
	n := utf8.EncodeRune(in[:], r)
	d := norm.NFD.Append(buf[:0], in[:n]...)
	first, _ := utf8.DecodeRune(d)
	return first
}

// isControl reports whether r is in category C other than Cn: Cc, Cf, Co
// or Cs (llama.cpp's control flag).
func isControl(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isCJK reports whether r is a CJK ideograph, a word of its own in
// WordPiece: the blocks BERT's tokenizer lists (with the extension-D/E
// bound of U+2B920 that Hugging Face's Rust code uses, which llama.cpp
// copies).
func isCJK(r rune) bool {
	return (r >= 0x4e00 && r <= 0x9fff) ||
		(r >= 0x3400 && r <= 0x4dbf) ||
		(r >= 0x20000 && r <= 0x2a6df) ||
		(r >= 0x2a700 && r <= 0x2b73f) ||
		(r >= 0x2b740 && r <= 0x2b81f) ||
		(r >= 0x2b920 && r <= 0x2ceaf) ||
		(r >= 0xf900 && r <= 0xfaff) ||
		(r >= 0x2f800 && r <= 0x2fa1f)
}
