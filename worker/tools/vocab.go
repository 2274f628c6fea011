package tools

import (
	"bytes"
	"math/bits"
	"reflect"
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// vocabSource is the tokenizer a vocabulary index is built from (the
// tools package's Vocab).
type vocabSource interface {
	VocabSize() int
	Piece(id int32) []byte
	IsEOG(id int32) bool
}

// tokenTyper is the optional part of a vocabSource.
type tokenTyper interface {
	TokenType(id int32) tokenizer.TokenType
}

// vocabIndex is everything derived once per vocabulary: the pieces, the EOG
// tokens and a byte trie over the pieces laid out in preorder, so that a
// mask is one linear scan that skips dead subtrees.
type vocabIndex struct {
	size    int
	words   int      // (size+63)/64
	pieces  [][]byte // raw bytes per token; nil when the token is not text
	eog     []int32
	maxLen  int      // longest piece, in bytes
	noText  []uint64 // tokens outside the trie (EOG, control, empty)
	eogMask []uint64

	// Token classes for JSON strings: a plain token is valid UTF-8 without
	// control characters, '"' or '\\', so inside a free string it only
	// adds code points; plainUpTo[k] holds the plain tokens of at most k
	// code points. The other text tokens are special, listed with the trie
	// node of each of their bytes.
	plainUpTo [][]uint64
	special   []int32
	specNodes [][]int32

	// Per trie node: the bytes below it (not its own) and how much deeper
	// its subtree goes; a walk skips a subtree whose bytes all keep an
	// automaton in the same state.
	subBytes []byteSet
	maxBelow []uint8
	// plainBelow[i]: every token below node i continues, after node i's
	// bytes, with plain text (whole UTF-8 characters, no control
	// character, '"' or '\\').
	plainBelow []bool

	// The trie, in preorder. Node i has byte nByte[i] at depth nDepth[i]
	// (the root is implicit at depth 0); nNext[i] is the index just past its
	// subtree; the tokens ending at i are nTok[nTokOff[i]:nTokOff[i+1]].
	nByte   []byte
	nDepth  []uint16
	nNext   []int32
	nTokOff []int32
	nTok    []int32
	// rootKids[b] is the index of the root's child with byte b, or -1.
	rootKids [256]int32

	// strCache is the vocabulary-wide cache of masks inside JSON strings
	// that carry no pattern (see leafCache).
	strCache leafCache
}

// vocabCache maps a comparable vocabSource to its index.
var vocabCache struct {
	mu    sync.Mutex
	m     map[vocabSource]*vocabIndex
	order []vocabSource
}

// maxCachedVocabs bounds vocabCache.
const maxCachedVocabs = 8

// indexVocab returns the index of v, building it on first use. Indexes of
// comparable vocabSource values (pointers, as *tokenizer.Tokenizer) are
// cached.
func indexVocab(v vocabSource) *vocabIndex {
	comparable := reflect.TypeOf(v).Comparable()
	if comparable {
		vocabCache.mu.Lock()
		if vi, ok := vocabCache.m[v]; ok {
			vocabCache.mu.Unlock()
			return vi
		}
		vocabCache.mu.Unlock()
	}
	vi := buildVocabIndex(v)
	if comparable {
		vocabCache.mu.Lock()
		defer vocabCache.mu.Unlock()
		if old, ok := vocabCache.m[v]; ok {
			return old
		}
		if vocabCache.m == nil {
			vocabCache.m = make(map[vocabSource]*vocabIndex)
		}
		if len(vocabCache.order) >= maxCachedVocabs {
			delete(vocabCache.m, vocabCache.order[0])
			vocabCache.order = vocabCache.order[1:]
		}
		vocabCache.m[v] = vi
		vocabCache.order = append(vocabCache.order, v)
	}
	return vi
}

// maxPieceLen bounds the pieces put into the trie; longer ones (none in
// real vocabularies) are never allowed under a constraint.
const maxPieceLen = 1024

func buildVocabIndex(v vocabSource) *vocabIndex {
	n := v.VocabSize()
	vi := &vocabIndex{size: n, words: (n + 63) / 64, pieces: make([][]byte, n)}
	tt, _ := v.(tokenTyper)
	ids := make([]int32, 0, n)
	for id := int32(0); int(id) < n; id++ {
		if v.IsEOG(id) {
			vi.eog = append(vi.eog, id)
			continue
		}
		if tt != nil {
			switch tt.TokenType(id) {
			case tokenizer.TypeControl, tokenizer.TypeUnknown, tokenizer.TypeUnused, tokenizer.TypeUndefined:
				continue
			}
		}
		p := v.Piece(id)
		if len(p) == 0 || len(p) > maxPieceLen {
			continue
		}
		vi.pieces[id] = p
		ids = append(ids, id)
		if len(p) > vi.maxLen {
			vi.maxLen = len(p)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		c := bytes.Compare(vi.pieces[ids[i]], vi.pieces[ids[j]])
		return c < 0 || c == 0 && ids[i] < ids[j]
	})
	for i := range vi.rootKids {
		vi.rootKids[i] = -1
	}
	// path[d] is the node at depth d+1 on the current path.
	var path []int32
	var prev []byte
	for _, id := range ids {
		p := vi.pieces[id]
		common := 0
		for common < len(p) && common < len(prev) && common < len(path) && p[common] == prev[common] {
			common++
		}
		for len(path) > common {
			vi.nNext[path[len(path)-1]] = int32(len(vi.nByte))
			path = path[:len(path)-1]
		}
		for d := common; d < len(p); d++ {
			idx := int32(len(vi.nByte))
			vi.nByte = append(vi.nByte, p[d])
			vi.nDepth = append(vi.nDepth, uint16(d+1))
			vi.nNext = append(vi.nNext, 0)
			vi.nTokOff = append(vi.nTokOff, int32(len(vi.nTok)))
			if d == 0 {
				vi.rootKids[p[0]] = idx
			}
			path = append(path, idx)
		}
		// The piece ends at the node created last: pieces are sorted, so a
		// duplicate follows its twin and a prefix precedes its extensions.
		vi.nTok = append(vi.nTok, id)
		prev = p
	}
	for _, idx := range path {
		vi.nNext[idx] = int32(len(vi.nByte))
	}
	vi.nTokOff = append(vi.nTokOff, int32(len(vi.nTok)))
	vi.eogMask = make([]uint64, vi.words)
	vi.setEOG(vi.eogMask)
	vi.noText = make([]uint64, vi.words)
	for id := 0; id < n; id++ {
		if vi.pieces[id] == nil {
			vi.noText[id>>6] |= 1 << (uint(id) & 63)
		}
	}
	vi.classify(ids)
	vi.subtrees()
	vi.plainSuffixes()
	vi.strCache.init(4096)
	return vi
}

// classify fills plainUpTo, special and specNodes; ids are the text tokens
// in trie order.
func (vi *vocabIndex) classify(ids []int32) {
	vi.plainUpTo = make([][]uint64, vi.maxLen+1)
	for k := range vi.plainUpTo {
		vi.plainUpTo[k] = make([]uint64, vi.words)
	}
	for _, id := range ids {
		p := vi.pieces[id]
		plain := utf8.Valid(p)
		for _, c := range p {
			if c < 0x20 || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			n := utf8.RuneCount(p)
			for k := n; k <= vi.maxLen; k++ {
				vi.plainUpTo[k][id>>6] |= 1 << (uint(id) & 63)
			}
			continue
		}
		nodes := make([]int32, len(p))
		n := int32(-1)
		for i, c := range p {
			if n < 0 {
				n = vi.rootKids[c]
			} else {
				n = vi.child(n, c)
			}
			nodes[i] = n
		}
		vi.special = append(vi.special, id)
		vi.specNodes = append(vi.specNodes, nodes)
	}
}

// subtrees fills subBytes and maxBelow, children before parents.
func (vi *vocabIndex) subtrees() {
	n := len(vi.nByte)
	vi.subBytes = make([]byteSet, n)
	vi.maxBelow = make([]uint8, n)
	for i := n - 1; i >= 0; i-- {
		for c := int32(i) + 1; c < vi.nNext[i]; c = vi.nNext[c] {
			vi.subBytes[i].add(vi.nByte[c])
			vi.subBytes[i].union(&vi.subBytes[c])
			if m := vi.maxBelow[c] + 1; m > vi.maxBelow[i] {
				vi.maxBelow[i] = m
			}
		}
	}
}

// plainSuffixes fills plainBelow.
func (vi *vocabIndex) plainSuffixes() {
	n := len(vi.nByte)
	vi.plainBelow = make([]bool, n)
	for i := range vi.plainBelow {
		vi.plainBelow[i] = true
	}
	// For each token, walk its path; a node whose suffix in this token is
	// not plain is marked for all its ancestors' sakes on the way down.
	plain := func(b []byte) bool {
		if !utf8.Valid(b) {
			return false
		}
		for _, c := range b {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	for i := 0; i < n; i++ {
		for _, t := range vi.nodeTokens(int32(i)) {
			p := vi.pieces[t]
			node := int32(-1)
			for k := 0; k < len(p)-1; k++ {
				if node < 0 {
					node = vi.rootKids[p[0]]
				} else {
					node = vi.child(node, p[k])
				}
				if !plain(p[k+1:]) {
					vi.plainBelow[node] = false
				}
			}
		}
	}
}

// setSubtree sets the tokens strictly below node i.
func (vi *vocabIndex) setSubtree(mask []uint64, i int32) {
	for _, t := range vi.nTok[vi.nTokOff[i+1]:vi.nTokOff[vi.nNext[i]]] {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// child returns the child of trie node n with byte c, or -1.
func (vi *vocabIndex) child(n int32, c byte) int32 {
	for i := n + 1; i < vi.nNext[n]; i = vi.nNext[i] {
		if vi.nByte[i] == c {
			return i
		}
	}
	return -1
}

// nodeTokens returns the tokens whose piece ends exactly at trie node i.
func (vi *vocabIndex) nodeTokens(i int32) []int32 {
	return vi.nTok[vi.nTokOff[i]:vi.nTokOff[i+1]]
}

// setNode sets the bits of the tokens ending at node i.
func (vi *vocabIndex) setNode(mask []uint64, i int32) {
	for _, t := range vi.nTok[vi.nTokOff[i]:vi.nTokOff[i+1]] {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// orNoText sets the bits of the tokens that carry no text.
func (vi *vocabIndex) orNoText(mask []uint64) { orMask(mask, vi.noText) }

// setEOG sets the bits of the end-of-generation tokens.
func (vi *vocabIndex) setEOG(mask []uint64) {
	for _, t := range vi.eog {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// clearEOG clears the bits of the end-of-generation tokens.
func (vi *vocabIndex) clearEOG(mask []uint64) {
	for _, t := range vi.eog {
		mask[t>>6] &^= 1 << (uint(t) & 63)
	}
}

// isEOG reports whether t is an end-of-generation token.
func (vi *vocabIndex) isEOG(t int32) bool {
	return maskHas(vi.eogMask, t)
}

// fillAll sets every token bit (and nothing past size).
func (vi *vocabIndex) fillAll(mask []uint64) {
	for i := range mask {
		mask[i] = ^uint64(0)
	}
	if r := vi.size & 63; r != 0 && len(mask) > 0 {
		mask[len(mask)-1] = (1 << uint(r)) - 1
	}
}

func clearMask(mask []uint64) {
	for i := range mask {
		mask[i] = 0
	}
}

func orMask(dst, src []uint64) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

func andMask(dst, src []uint64) {
	for i := range dst {
		dst[i] &= src[i]
	}
}

func maskEmpty(mask []uint64) bool {
	for _, w := range mask {
		if w != 0 {
			return false
		}
	}
	return true
}

func maskCount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}

func maskHas(mask []uint64, t int32) bool {
	return t >= 0 && int(t>>6) < len(mask) && mask[t>>6]&(1<<(uint(t)&63)) != 0
}

// stepper is a state machine the trie walk drives one byte at a time: step
// computes the state at depth d (d >= 1, relative to where the walk
// starts) from the state at depth d-1 and byte b of trie node node, and
// reports whether it is alive (every token ending there is then allowed).
// The state at depth 0 is set by the caller. Because the trie is walked in
// preorder, the state at depth d-1 is always the parent's.
type stepper interface {
	step(d int, b byte, node int32) bool
}

// walk sets in mask every token of the subtree under node `from` (-1: the
// whole trie) whose bytes keep s alive; the tokens at `from` itself are not
// considered. It charges one unit of fuel per visited node and stops with
// errStepBudget when the fuel runs out.
func (vi *vocabIndex) walk(from int32, s stepper, mask []uint64, f *fuel) error {
	var i, end int32
	base := 0
	if from < 0 {
		i, end = 0, int32(len(vi.nByte))
	} else {
		i, end, base = from+1, vi.nNext[from], int(vi.nDepth[from])
	}
	nb, nd, nn, off := vi.nByte, vi.nDepth, vi.nNext, vi.nTokOff
	spent := int64(0)
	for i < end {
		spent++
		if s.step(int(nd[i])-base, nb[i], i) {
			if off[i] != off[i+1] {
				vi.setNode(mask, i)
			}
			i++
		} else {
			i = nn[i]
		}
		if spent&1023 == 0 {
			if err := f.spend(1024); err != nil {
				return err
			}
		}
	}
	return f.spend(spent & 1023)
}
