package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// GPT-2 byte-level BPE never sees raw bytes: every byte is first replaced by
// one printable character. Bytes that are printable Latin-1 ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 are given the
// characters U+0100, U+0101, ... in byte order (so a space is 'Ġ' U+0120 and
// a newline 'Ċ' U+010A).
var (
	byteToRune [256]rune
	runeToByte [256 + 68]int16 // -1 where a rune stands for no byte
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// appendByteDecoded appends the bytes that the GPT-2 characters of s stand
// for. A character outside the alphabet (only found in malformed
// vocabularies) is copied as it is.
func appendByteDecoded(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r < rune(len(runeToByte)) && runeToByte[r] >= 0 && !(r == utf8.RuneError && n == 1) {
			dst = append(dst, byte(runeToByte[r]))
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// bpeMerge is one entry of the merge table.
type bpeMerge struct {
	rank   int32 // position in tokenizer.ggml.merges: lower merges first
	result int32 // symbol id of the merged string
}

// Symbol ids: a string that is a token has its token id as symbol id; a
// string that appears in the merges without being a token gets an id of
// VocabSize or more. Merging then works on integers, not strings.

// loadBPE builds the merge table and the per-byte symbols.
func (t *Tokenizer) loadBPE(merges []string) {
	n := int32(len(t.tokens))
	extra := map[string]int32{}
	sym := func(s string) int32 {
		if id, ok := t.toID[s]; ok {
			return id
		}
		if id, ok := extra[s]; ok {
			return id
		}
		id := n + int32(len(extra))
		extra[s] = id
		return id
	}
	t.merges = make(map[uint64]bpeMerge, len(merges))
	var buf []byte
	for rank, m := range merges {
		// The separator is the first space after the first byte, so that a
		// left part may itself start with a space.
		if len(m) < 3 {
			continue
		}
		sp := strings.IndexByte(m[1:], ' ')
		if sp < 0 {
			continue
		}
		a, b := m[:sp+1], m[sp+2:]
		left, right := sym(a), sym(b)
		buf = append(append(buf[:0], a...), b...)
		result, ok := t.toID[string(buf)]
		if !ok {
			result = sym(string(buf))
		}
		key := pairKey(left, right)
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = bpeMerge{rank: int32(rank), result: result}
		}
	}
	var ch [utf8.UTFMax]byte
	for b := 0; b < 256; b++ {
		key := ch[:utf8.EncodeRune(ch[:], byteToRune[b])]
		t.byteTok[b], t.byteSym[b] = -1, -1
		if id, ok := t.toID[string(key)]; ok {
			t.byteTok[b], t.byteSym[b] = id, id
		} else if id, ok := extra[string(key)]; ok {
			t.byteSym[b] = id
		}
	}
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// bpeSymbol is a run of bytes of the word being merged, linked to its
// neighbours.
type bpeSymbol struct {
	id         int32 // symbol id, -1 if the string is in no merge or token
	start, n   int32 // bytes word[start:start+n]; n is 0 once merged away
	prev, next int32 // neighbours, -1 at the ends
}

// bpeWord appends the tokens of one pre-tokenized word (raw bytes).
func (t *Tokenizer) bpeWord(out []int32, word string, sc *scratch) []int32 {
	if len(word) == 1 {
		return t.appendBytes(out, word)
	}
	if t.preTok.ignoreMerges {
		sc.buf = sc.buf[:0]
		for i := 0; i < len(word); i++ {
			sc.buf = utf8.AppendRune(sc.buf, byteToRune[word[i]])
		}
		if id, ok := t.toID[string(sc.buf)]; ok && t.plain(id) {
			return append(out, id)
		}
	}
	syms := sc.bpeSyms[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, bpeSymbol{id: t.byteSym[word[i]], start: int32(i), n: 1, prev: int32(i) - 1, next: int32(i) + 1})
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := &syms[l], &syms[r]
		if a.id < 0 || b.id < 0 {
			return
		}
		m, ok := t.merges[pairKey(a.id, b.id)]
		if !ok {
			return
		}
		h = pushPair(h, pair{key: rankKey(m.rank, l), right: r, size: a.n + b.n, result: m.result})
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
		// grow, so unchanged sizes mean unchanged strings.
		if l.n == 0 || r.n == 0 || l.n+r.n != p.size {
			continue
		}
		l.id = p.result
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
		s := &syms[i]
		if s.id >= 0 && int(s.id) < len(t.tokens) && t.plain(s.id) {
			out = append(out, s.id)
			continue
		}
		out = t.appendBytes(out, word[s.start:s.start+s.n])
	}
	sc.bpeSyms, sc.heap = syms, h
	return out
}

// appendBytes appends, for each byte, the token of its GPT-2 character; if
// the vocabulary lacks one, the unknown token, or nothing when there is none
// either.
func (t *Tokenizer) appendBytes(out []int32, s string) []int32 {
	for i := 0; i < len(s); i++ {
		switch id := t.byteTok[s[i]]; {
		case id >= 0:
			out = append(out, id)
		case t.unk >= 0:
			out = append(out, t.unk)
		}
	}
	return out
}
