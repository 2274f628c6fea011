package vocab

import (
	"bytes"
	"math/bits"
	"reflect"
	"sort"
	"sync"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// Source is the tokenizer a vocabulary index is built from (the
// tools package's Vocab).
type Source interface {
	VocabSize() int
	Piece(id int32) []byte
	IsEOG(id int32) bool
}

// tokenTyper is the optional part of a Source.
type tokenTyper interface {
	TokenType(id int32) tokenizer.TokenType
}

// Index is everything derived once per vocabulary: the pieces, the EOG
// tokens and a byte trie over the pieces laid out in preorder, so that a
// mask is one linear scan that skips dead subtrees.
type Index struct {
	// Size is the number of tokens.
	Size   int
	Words  int      // (size+63)/64
	Pieces [][]byte // raw bytes per token; nil when the token is not text
	// EOG are the end-of-generation tokens.
	EOG     []int32
	MaxLen  int      // longest piece, in bytes
	noText  []uint64 // tokens outside the trie (EOG, control, empty)
	eogMask []uint64

	// Token classes for JSON strings: a plain token is valid UTF-8 without
	// control characters, '"' or '\\', so inside a free string it only
	// adds code points; PlainUpTo[k] holds the plain tokens of at most k
	// code points. The other text tokens are special, listed with the trie
	// node of each of their bytes.
	PlainUpTo [][]uint64
	// Special are the text tokens that are not plain, and SpecialNodes the
	// trie node of each of their bytes.
	Special      []int32
	SpecialNodes [][]int32
	// The special tokens' bytes laid out flat, in Special's order, so that
	// a leaf simulating them reads memory in order: token i's bytes are
	// SpecialText[SpecialStart[i]:SpecialStart[i+1]] and the trie node of
	// each is at the same offset in SpecialNode.
	SpecialText  []byte
	SpecialNode  []int32
	SpecialStart []int32
	// LeafSpecials are the indexes into Special of the tokens a plain
	// string or key state (no pattern, not inside an escape or a
	// character) may take: after their plain text they reach a '"' or a
	// '\\', or end inside a UTF-8 character. The others reach a control
	// character or a byte no UTF-8 text has there, and are always refused.
	// They are in the byte order of the tokens.
	LeafSpecials []int32
	// SpecialPlain and SpecialPlainRunes are, per special token, the bytes
	// and code points of its plain prefix: the whole characters before
	// its first '"', '\\', control character or byte that does not
	// complete a valid character. A plain leaf state takes them as code
	// points and nothing else.
	SpecialPlain, SpecialPlainRunes []int32

	// Per trie node: the bytes below it (not its own) and how much deeper
	// its subtree goes; a walk skips a subtree whose bytes all keep an
	// automaton in the same state.
	SubBytes []automaton.ByteSet
	// MaxBelow is how much deeper the node's subtree goes.
	MaxBelow []uint8
	// ASCIIBelow[i]: every byte below node i is printable ASCII other than
	// '"' and '\\' (SubBytes[i] read without loading it).
	ASCIIBelow []bool
	// PlainBelow[i]: every token below node i continues, after node i's
	// bytes, with plain text (whole UTF-8 characters, no control
	// character, '"' or '\\').
	PlainBelow []bool

	// The trie, in preorder. Node i has byte NodeByte[i] at depth NodeDepth[i]
	// (the root is implicit at depth 0); SubtreeEnd[i] is the index just past its
	// subtree; the tokens ending at i are nTok[TokenStart[i]:TokenStart[i+1]].
	NodeByte   []byte
	NodeDepth  []uint16
	SubtreeEnd []int32
	TokenStart []int32
	nTok       []int32
	// rootKids[b] is the index of the root's child with byte b, or -1.
	rootKids [256]int32

	// Shape[i] numbers the shape of node i's subtree: whether tokens end
	// at i, and each child's byte and shape. Nodes of the same byte and
	// shape have the same preorder layout from them down, so a walk from
	// one, recorded as offsets, answers for all of them (the tokens that
	// leave a string repeat a few: '"' then ',' or '}', ...).
	Shape []int32

	// StringCache is the vocabulary-wide cache of masks inside JSON strings
	// that carry no pattern (see LeafCache).
	StringCache LeafCache
}

// vocabCache maps a comparable Source to its index.
var vocabCache struct {
	mu    sync.Mutex
	m     map[Source]*Index
	order []Source
}

// maxCachedVocabs bounds vocabCache.
const maxCachedVocabs = 8

// IndexOf returns the index of v, building it on first use. Indexes of
// comparable Source values (pointers, as *tokenizer.Tokenizer) are
// cached.
func IndexOf(v Source) *Index {
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
			vocabCache.m = make(map[Source]*Index)
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

func buildVocabIndex(v Source) *Index {
	n := v.VocabSize()
	vi := &Index{Size: n, Words: (n + 63) / 64, Pieces: make([][]byte, n)}
	tt, _ := v.(tokenTyper)
	ids := make([]int32, 0, n)
	for id := int32(0); int(id) < n; id++ {
		if v.IsEOG(id) {
			vi.EOG = append(vi.EOG, id)
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
		vi.Pieces[id] = p
		ids = append(ids, id)
		if len(p) > vi.MaxLen {
			vi.MaxLen = len(p)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		c := bytes.Compare(vi.Pieces[ids[i]], vi.Pieces[ids[j]])
		return c < 0 || c == 0 && ids[i] < ids[j]
	})
	for i := range vi.rootKids {
		vi.rootKids[i] = -1
	}
	// path[d] is the node at depth d+1 on the current path.
	var path []int32
	var prev []byte
	for _, id := range ids {
		p := vi.Pieces[id]
		common := 0
		for common < len(p) && common < len(prev) && common < len(path) && p[common] == prev[common] {
			common++
		}
		for len(path) > common {
			vi.SubtreeEnd[path[len(path)-1]] = int32(len(vi.NodeByte))
			path = path[:len(path)-1]
		}
		for d := common; d < len(p); d++ {
			idx := int32(len(vi.NodeByte))
			vi.NodeByte = append(vi.NodeByte, p[d])
			vi.NodeDepth = append(vi.NodeDepth, uint16(d+1))
			vi.SubtreeEnd = append(vi.SubtreeEnd, 0)
			vi.TokenStart = append(vi.TokenStart, int32(len(vi.nTok)))
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
		vi.SubtreeEnd[idx] = int32(len(vi.NodeByte))
	}
	vi.TokenStart = append(vi.TokenStart, int32(len(vi.nTok)))
	vi.eogMask = make([]uint64, vi.Words)
	vi.SetEOG(vi.eogMask)
	vi.noText = make([]uint64, vi.Words)
	for id := 0; id < n; id++ {
		if vi.Pieces[id] == nil {
			vi.noText[id>>6] |= 1 << (uint(id) & 63)
		}
	}
	vi.classify(ids)
	vi.subtrees()
	vi.shapes()
	vi.plainSuffixes()
	vi.StringCache.Init(4096)
	return vi
}

// classify fills PlainUpTo, Special and SpecialNodes; ids are the text tokens
// in trie order.
func (vi *Index) classify(ids []int32) {
	vi.PlainUpTo = make([][]uint64, vi.MaxLen+1)
	for k := range vi.PlainUpTo {
		vi.PlainUpTo[k] = make([]uint64, vi.Words)
	}
	for _, id := range ids {
		p := vi.Pieces[id]
		plain := utf8.Valid(p)
		for _, c := range p {
			if c < 0x20 || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			n := utf8.RuneCount(p)
			for k := n; k <= vi.MaxLen; k++ {
				vi.PlainUpTo[k][id>>6] |= 1 << (uint(id) & 63)
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
		if leafSpecial(p) {
			vi.LeafSpecials = append(vi.LeafSpecials, int32(len(vi.Special)))
		}
		nb, nr := plainPrefix(p)
		vi.SpecialPlain = append(vi.SpecialPlain, nb)
		vi.SpecialPlainRunes = append(vi.SpecialPlainRunes, nr)
		vi.SpecialStart = append(vi.SpecialStart, int32(len(vi.SpecialText)))
		vi.SpecialText = append(vi.SpecialText, p...)
		vi.SpecialNode = append(vi.SpecialNode, nodes...)
		vi.Special = append(vi.Special, id)
		vi.SpecialNodes = append(vi.SpecialNodes, nodes)
	}
	vi.SpecialStart = append(vi.SpecialStart, int32(len(vi.SpecialText)))
	// Byte order: tokens with a common prefix come together (a plain
	// leaf's simulation skips those that stop where the one before did).
	sort.Slice(vi.LeafSpecials, func(a, b int) bool {
		return bytes.Compare(vi.Pieces[vi.Special[vi.LeafSpecials[a]]], vi.Pieces[vi.Special[vi.LeafSpecials[b]]]) < 0
	})
}

// leafSpecial reports whether a string or key in a plain state may take
// the special token p (see Index.LeafSpecials).
func leafSpecial(p []byte) bool {
	k := 0
	for k < len(p) {
		c := p[k]
		if c == '"' || c == '\\' {
			return true
		}
		if c < 0x20 {
			return false
		}
		r, n := utf8.DecodeRune(p[k:])
		if r == utf8.RuneError && n <= 1 {
			return utf8Prefix(p[k:])
		}
		k += n
	}
	return true // not reached: p is not plain
}

// plainPrefix returns the bytes and code points of the plain text p starts
// with (see Index.SpecialPlain).
func plainPrefix(p []byte) (nb, nr int32) {
	for int(nb) < len(p) {
		c := p[nb]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		r, n := utf8.DecodeRune(p[nb:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		nb += int32(n)
		nr++
	}
	return nb, nr
}

// utf8Prefix reports whether p, shorter than a character, is the start of
// a valid UTF-8 encoding.
func utf8Prefix(p []byte) bool {
	if len(p) == 0 || len(p) > 3 {
		return false
	}
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := p[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return false
	}
	if len(p) > need {
		return false
	}
	for i, c := range p[1:] {
		if c < lo || c > hi {
			return false
		}
		if i == 0 {
			lo, hi = 0x80, 0xBF
		}
	}
	return true
}

// subtrees fills SubBytes and MaxBelow, children before parents.
func (vi *Index) subtrees() {
	n := len(vi.NodeByte)
	vi.SubBytes = make([]automaton.ByteSet, n)
	vi.MaxBelow = make([]uint8, n)
	vi.ASCIIBelow = make([]bool, n)
	var ascii automaton.ByteSet
	for b := 0x20; b < 0x80; b++ {
		if b != '"' && b != '\\' {
			ascii.Add(byte(b))
		}
	}
	for i := n - 1; i >= 0; i-- {
		for c := int32(i) + 1; c < vi.SubtreeEnd[i]; c = vi.SubtreeEnd[c] {
			vi.SubBytes[i].Add(vi.NodeByte[c])
			vi.SubBytes[i].Union(&vi.SubBytes[c])
			if m := vi.MaxBelow[c] + 1; m > vi.MaxBelow[i] {
				vi.MaxBelow[i] = m
			}
		}
		vi.ASCIIBelow[i] = vi.SubBytes[i].SubsetOf(&ascii)
	}
}

// shapes fills Shape, children before parents.
func (vi *Index) shapes() {
	n := len(vi.NodeByte)
	vi.Shape = make([]int32, n)
	ids := make(map[string]int32)
	var key []byte
	for i := n - 1; i >= 0; i-- {
		key = key[:0]
		if vi.TokenStart[i] != vi.TokenStart[i+1] {
			key = append(key, 1)
		} else {
			key = append(key, 0)
		}
		for c := int32(i) + 1; c < vi.SubtreeEnd[i]; c = vi.SubtreeEnd[c] {
			sh := vi.Shape[c]
			key = append(key, vi.NodeByte[c], byte(sh), byte(sh>>8), byte(sh>>16), byte(sh>>24))
		}
		id, ok := ids[string(key)]
		if !ok {
			id = int32(len(ids))
			ids[string(key)] = id
		}
		vi.Shape[i] = id
	}
}

// plainSuffixes fills PlainBelow.
func (vi *Index) plainSuffixes() {
	n := len(vi.NodeByte)
	vi.PlainBelow = make([]bool, n)
	for i := range vi.PlainBelow {
		vi.PlainBelow[i] = true
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
			p := vi.Pieces[t]
			node := int32(-1)
			for k := 0; k < len(p)-1; k++ {
				if node < 0 {
					node = vi.rootKids[p[0]]
				} else {
					node = vi.child(node, p[k])
				}
				if !plain(p[k+1:]) {
					vi.PlainBelow[node] = false
				}
			}
		}
	}
}

// SetSubtree sets the tokens strictly below node i.
func (vi *Index) SetSubtree(mask []uint64, i int32) {
	for _, t := range vi.nTok[vi.TokenStart[i+1]:vi.TokenStart[vi.SubtreeEnd[i]]] {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// child returns the child of trie node n with byte c, or -1.
func (vi *Index) child(n int32, c byte) int32 {
	for i := n + 1; i < vi.SubtreeEnd[n]; i = vi.SubtreeEnd[i] {
		if vi.NodeByte[i] == c {
			return i
		}
	}
	return -1
}

// nodeTokens returns the tokens whose piece ends exactly at trie node i.
func (vi *Index) nodeTokens(i int32) []int32 {
	return vi.nTok[vi.TokenStart[i]:vi.TokenStart[i+1]]
}

// SetNode sets the bits of the tokens ending at node i.
func (vi *Index) SetNode(mask []uint64, i int32) {
	for _, t := range vi.nTok[vi.TokenStart[i]:vi.TokenStart[i+1]] {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// OrNoText sets the bits of the tokens that carry no text.
func (vi *Index) OrNoText(mask []uint64) { OrMask(mask, vi.noText) }

// SetEOG sets the bits of the end-of-generation tokens.
func (vi *Index) SetEOG(mask []uint64) {
	for _, t := range vi.EOG {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// ClearEOG clears the bits of the end-of-generation tokens.
func (vi *Index) ClearEOG(mask []uint64) {
	for _, t := range vi.EOG {
		mask[t>>6] &^= 1 << (uint(t) & 63)
	}
}

// IsEOG reports whether t is an end-of-generation token.
func (vi *Index) IsEOG(t int32) bool {
	return MaskHas(vi.eogMask, t)
}

// FillAll sets every token bit (and nothing past size).
func (vi *Index) FillAll(mask []uint64) {
	for i := range mask {
		mask[i] = ^uint64(0)
	}
	if r := vi.Size & 63; r != 0 && len(mask) > 0 {
		mask[len(mask)-1] = (1 << uint(r)) - 1
	}
}

// ClearMask clears every bit of mask.
func ClearMask(mask []uint64) {
	for i := range mask {
		mask[i] = 0
	}
}

// OrMask sets in dst every bit set in src.
func OrMask(dst, src []uint64) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

// AndMask clears in dst every bit clear in src.
func AndMask(dst, src []uint64) {
	for i := range dst {
		dst[i] &= src[i]
	}
}

// MaskEmpty reports whether no bit of mask is set.
func MaskEmpty(mask []uint64) bool {
	for _, w := range mask {
		if w != 0 {
			return false
		}
	}
	return true
}

// MaskCount returns the number of bits set in mask.
func MaskCount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}

// MaskHas reports whether token t's bit is set in mask.
func MaskHas(mask []uint64, t int32) bool {
	return t >= 0 && int(t>>6) < len(mask) && mask[t>>6]&(1<<(uint(t)&63)) != 0
}

// Stepper is a state machine the trie walk drives one byte at a time: Step
// computes the state at depth d (d >= 1, relative to where the walk
// starts) from the state at depth d-1 and byte b of trie node node, and
// reports whether it is alive (every token ending there is then allowed).
// The state at depth 0 is set by the caller. Because the trie is walked in
// preorder, the state at depth d-1 is always the parent's.
type Stepper interface {
	Step(d int, b byte, node int32) bool
}

// WalkChild walks the subtree of child, a child of node parent, as Walk
// under parent would (depths relative to parent), and appends to out the
// nodes where allowed tokens end; it returns out.
func (vi *Index) WalkChild(parent, child int32, s Stepper, out []int32, f *limit.Fuel) ([]int32, error) {
	i, end, base := child, vi.SubtreeEnd[child], int(vi.NodeDepth[parent])
	nb, nd, nn, off := vi.NodeByte, vi.NodeDepth, vi.SubtreeEnd, vi.TokenStart
	spent := int64(0)
	for i < end {
		spent++
		if s.Step(int(nd[i])-base, nb[i], i) {
			if off[i] != off[i+1] {
				out = append(out, i)
			}
			i++
		} else {
			i = nn[i]
		}
	}
	return out, f.Spend(spent)
}

// SubtreeTaker is an optional part of a Stepper: Whole reports, right
// after Step(d, b, node) returned true, whether every token below node is
// allowed too, so that the walk takes the subtree without visiting it.
type SubtreeTaker interface {
	Whole(d int, node int32) bool
}

// Walk sets in mask every token of the subtree under node `from` (-1: the
// whole trie) whose bytes keep s alive; the tokens at `from` itself are not
// considered. It charges one unit of fuel per visited node and stops with
// limit.ErrStepBudget when the fuel runs out.
func (vi *Index) Walk(from int32, s Stepper, mask []uint64, f *limit.Fuel) error {
	t, _ := s.(SubtreeTaker)
	var i, end int32
	base := 0
	if from < 0 {
		i, end = 0, int32(len(vi.NodeByte))
	} else {
		i, end, base = from+1, vi.SubtreeEnd[from], int(vi.NodeDepth[from])
	}
	nb, nd, nn, off := vi.NodeByte, vi.NodeDepth, vi.SubtreeEnd, vi.TokenStart
	spent := int64(0)
	for i < end {
		spent++
		d := int(nd[i]) - base
		if !s.Step(d, nb[i], i) {
			i = nn[i]
		} else {
			if off[i] != off[i+1] {
				vi.SetNode(mask, i)
			}
			if t != nil && nn[i] != i+1 && t.Whole(d, i) {
				vi.SetSubtree(mask, i)
				i = nn[i]
			} else {
				i++
			}
		}
		if spent&1023 == 0 {
			if err := f.Spend(1024); err != nil {
				return err
			}
		}
	}
	return f.Spend(spent & 1023)
}
