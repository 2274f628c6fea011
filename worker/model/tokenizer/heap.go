package tokenizer

import "math"

// pair is a candidate merge of two adjacent symbols, kept in a binary
// min-heap ordered by key. Both tokenizers encode their priority in the key
// so that the heap compares plain integers: the high 32 bits hold the merge
// priority, the low 32 bits the index of the left symbol, so that ties go to
// the leftmost pair.
type pair struct {
	key    uint64
	right  int32 // index of the right symbol
	size   int32 // byte length of the two symbols together when queued
	result int32 // BPE: symbol id of the merged string
}

// left returns the index of the left symbol.
func (p pair) left() int32 { return int32(uint32(p.key)) }

// rankKey orders BPE merges: lowest rank first, then leftmost.
func rankKey(rank, left int32) uint64 { return uint64(uint32(rank))<<32 | uint64(uint32(left)) }

// scoreKey orders SentencePiece merges: highest score first, then leftmost.
// The float's bits are mapped to an unsigned integer that sorts like the
// float, then inverted so that higher scores come first.
func scoreKey(score float32, left int32) uint64 {
	b := math.Float32bits(score)
	if b&(1<<31) != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return uint64(^b)<<32 | uint64(uint32(left))
}

// pushPair adds p to the heap h and returns the grown slice.
func pushPair(h []pair, p pair) []pair {
	h = append(h, p)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].key <= p.key {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = p
	return h
}

// popPair removes the smallest pair of the non-empty heap h and returns it
// with the shrunk slice.
func popPair(h []pair) (pair, []pair) {
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	n := len(h)
	if n == 0 {
		return top, h
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].key < h[c].key {
			c = r
		}
		if last.key <= h[c].key {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = last
	return top, h
}
