package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// spmSymbol is a run of bytes of the escaped text, linked to its
// neighbours.
type spmSymbol struct {
	start, n   int32 // bytes esc[start:start+n]; n is 0 once merged away
	prev, next int32 // neighbours, -1 at the ends
}

// spmEncode appends the tokens of one text fragment (no special tokens in
// it). With prefix set a space is put in front, as SentencePiece's dummy
// prefix.
func (t *Tokenizer) spmEncode(out []int32, text string, prefix bool, sc *scratch) []int32 {
	esc := sc.buf[:0]
	if prefix {
		esc = append(esc, spaceMark...)
	}
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			esc = append(esc, spaceMark...)
		} else {
			esc = append(esc, text[i])
		}
	}
	sc.buf = esc
	if !t.spmWords {
		return t.spmMerge(out, esc, sc)
	}
	// No token has U+2581 after another character, so no merge can join
	// a character to a U+2581 that follows it: the text between such
	// places merges on its own, with the same result and a small queue.
	start := 0
	for i := 1; i+len(spaceMark) <= len(esc); i++ {
		if esc[i] == spaceMark[0] && string(esc[i:i+len(spaceMark)]) == spaceMark &&
			!(i >= len(spaceMark) && string(esc[i-len(spaceMark):i]) == spaceMark) {
			out = t.spmMerge(out, esc[start:i], sc)
			start = i
		}
	}
	return t.spmMerge(out, esc[start:], sc)
}

// spmMerge appends the tokens of escaped text: it merges, while it can, the
// adjacent pair whose concatenation is the token with the highest score.
func (t *Tokenizer) spmMerge(out []int32, esc []byte, sc *scratch) []int32 {
	if len(esc) == 0 {
		return out
	}

	// The initial symbols are the characters. A byte that is not part of
	// valid UTF-8 is a symbol of its own (llama.cpp judges the length by
	// the first byte alone, which for invalid input can swallow the next
	// character and turn a space into the bytes of U+2581).
	syms := sc.spmSyms[:0]
	for off := int32(0); off < int32(len(esc)); {
		n := int32(1)
		if esc[off] >= utf8.RuneSelf {
			_, w := utf8.DecodeRune(esc[off:])
			n = int32(w)
		}
		i := int32(len(syms))
		syms = append(syms, spmSymbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		start, end := syms[l].start, syms[r].start+syms[r].n
		id, ok := t.toID[string(esc[start:end])]
		if !ok || !t.plain(id) {
			return
		}
		var score float32
		if t.scores != nil {
			score = t.scores[id]
		}
		h = pushPair(h, pair{key: scoreKey(score, l), right: r, size: end - start})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		var p pair
		p, h = popPair(h)
		left := p.left()
		l, r := &syms[left], &syms[p.right]
		// Skip candidates made stale by an earlier merge: symbols only
		// grow, so unchanged sizes mean the same two symbols.
		if l.n == 0 || r.n == 0 || l.n+r.n != p.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = left
		}
		try(l.prev, left)
		try(left, l.next)
	}

	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := esc[s.start : s.start+s.n]
		if id, ok := t.toID[string(piece)]; ok && t.plain(id) {
			out = append(out, id)
			continue
		}
		for _, b := range piece {
			if id := t.byteFallback[b]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	sc.spmSyms, sc.heap = syms, h
	return out
}

// spmWordsOK reports whether no token has U+2581 after a character other
// than U+2581, which lets spmEncode merge word by word.
func spmWordsOK(tokens []string) bool {
	for _, s := range tokens {
		for len(s) >= len(spaceMark) && s[:len(spaceMark)] == spaceMark {
			s = s[len(spaceMark):]
		}
		if strings.Contains(s, spaceMark) {
			return false
		}
	}
	return true
}

// loadByteFallback finds the token for each byte: "<0xXX>", else the
// one-byte string itself, else the unknown token, else none (-1: the byte is
// dropped).
func (t *Tokenizer) loadByteFallback() {
	for b := 0; b < 256; b++ {
		id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			id, ok = t.toID[string([]byte{byte(b)})]
		}
		if !ok {
			id = t.unk
		}
		t.byteFallback[b] = id
	}
}
