package tools

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// toxicity_filter: banned words can never be produced, whatever tokens
// spell them. A word automaton runs over the output bytes; the mask of an
// automaton state is a walk of the token trie that stops at every token
// completing a banned word, cached per state. Case is folded (ASCII).
//
// Modes:
//   - "block" (the default): no banned word anywhere, even inside another
//     word (an Aho-Corasick automaton);
//   - "word": no banned word as a whole word (letters, digits and '_' are
//     word characters; anything else, non-ASCII included, is a boundary);
//   - "redact": the words (trigger phrases) pass generation but are
//     replaced in the text stream, as pii_redactor does.

type toxMode uint8

const (
	toxBlock toxMode = iota
	toxWord
	toxRedact
)

// Limits of a word list.
const (
	maxToxWords = 10_000
	maxToxBytes = 64 << 10
)

type toxSpec struct {
	mode  toxMode
	words []string // folded
	// block mode: Aho-Corasick over folded bytes
	cls    [256]uint8
	ncls   int
	delta  []int32 // state*ncls + class
	out    []bool  // a word ends at this state (or its suffix)
	wordAt []int32 // index of a word ending here, for messages
	// word mode: a trie of the words
	trie *grammar.ByteTrie
	// redact mode
	redact *piiSpec

	vi    *vocab.Index
	cache vocab.LeafCache
	mem   *limit.Meter
}

func foldByte(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

func compileTox(words []string, mode string, vi *vocab.Index, b Budget) (*toxSpec, error) {
	t := &toxSpec{vi: vi, mem: limit.NewMeter(b.MaxMemoryBytes)}
	canon, _ := contracts.ToxicityMode(mode) // the caller checked it
	switch canon {
	case "block":
		t.mode = toxBlock
	case "word":
		t.mode = toxWord
	case "redact":
		t.mode = toxRedact
	default:
		return nil, fmt.Errorf("mode %q is not one of %s", mode, strings.Join(contracts.ToxicityModes(), ", "))
	}
	if len(words) > maxToxWords {
		return nil, fmt.Errorf("%d words; at most %d are allowed", len(words), maxToxWords)
	}
	total := 0
	for _, w := range words {
		total += len(w)
		f := make([]byte, len(w))
		for i := 0; i < len(w); i++ {
			f[i] = foldByte(w[i])
		}
		t.words = append(t.words, string(f))
	}
	if total > maxToxBytes {
		return nil, fmt.Errorf("the words total %d bytes; at most %d are allowed", total, maxToxBytes)
	}
	t.cache.Init(1024)
	switch t.mode {
	case toxBlock:
		if err := t.buildAC(); err != nil {
			return nil, err
		}
	case toxWord:
		t.trie = grammar.NewByteTrie()
		for i, w := range t.words {
			t.trie.Add([]byte(w), int32(i))
		}
	case toxRedact:
		alts := make([]string, len(words))
		for i, w := range words {
			alts[i] = regexp.QuoteMeta(w)
		}
		det := detectorDef{label: "REDACTED", pattern: `(?i:` + strings.Join(alts, "|") + `)`, maxLen: 0,
			startOK: func(prev byte, atStart bool) bool { return atStart || !isWordByte(prev) },
			endOK:   func(next byte, atEnd bool) bool { return atEnd || !isWordByte(next) }}
		lim := b
		lim.MaxRegexInsts = 4 * maxToxBytes
		p, err := compileDetectors([]detectorDef{det}, lim, limit.NewClock(b.CompileTimeout))
		if err != nil {
			return nil, err
		}
		t.redact = p
	}
	return t, nil
}

// buildAC builds the Aho-Corasick automaton of the words.
func (t *toxSpec) buildAC() error {
	var used [256]bool
	for _, w := range t.words {
		for i := 0; i < len(w); i++ {
			used[w[i]] = true
		}
	}
	cls := 1 // class 0: bytes in no word
	for b := 0; b < 256; b++ {
		if used[foldByte(byte(b))] {
			// Upper and lower case share the folded byte's class.
			f := foldByte(byte(b))
			if t.cls[f] == 0 {
				t.cls[f] = uint8(cls)
				cls++
			}
			t.cls[b] = t.cls[f]
		}
	}
	t.ncls = cls
	// Trie of words over classes.
	type tnode struct {
		next map[uint8]int32
		fail int32
	}
	nodes := []tnode{{next: map[uint8]int32{}}}
	t.out = []bool{false}
	t.wordAt = []int32{-1}
	for wi, w := range t.words {
		n := int32(0)
		for i := 0; i < len(w); i++ {
			c := t.cls[w[i]]
			nx, ok := nodes[n].next[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, tnode{next: map[uint8]int32{}})
				t.out = append(t.out, false)
				t.wordAt = append(t.wordAt, -1)
				nodes[n].next[c] = nx
			}
			n = nx
		}
		if len(w) > 0 {
			t.out[n] = true
			t.wordAt[n] = int32(wi)
		}
	}
	if err := t.mem.Charge(int64(len(nodes)) * int64(t.ncls) * 4); err != nil {
		return err
	}
	t.delta = make([]int32, len(nodes)*t.ncls)
	// Breadth first: fail links and full transitions.
	queue := []int32{}
	for c := 0; c < t.ncls; c++ {
		if nx, ok := nodes[0].next[uint8(c)]; ok {
			t.delta[c] = nx
			nodes[nx].fail = 0
			queue = append(queue, nx)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := nodes[s].fail
		if t.out[f] {
			t.out[s] = true
			if t.wordAt[s] < 0 {
				t.wordAt[s] = t.wordAt[f]
			}
		}
		for c := 0; c < t.ncls; c++ {
			if nx, ok := nodes[s].next[uint8(c)]; ok {
				nodes[nx].fail = t.delta[int(f)*t.ncls+c]
				t.delta[int(s)*t.ncls+c] = nx
				queue = append(queue, nx)
			} else {
				t.delta[int(s)*t.ncls+c] = t.delta[int(f)*t.ncls+c]
			}
		}
	}
	return nil
}

// next returns the automaton state after b, and whether a banned word was
// completed.
func (t *toxSpec) next(s int32, b byte) (int32, bool) {
	if t.mode == toxBlock {
		n := t.delta[int(s)*t.ncls+int(t.cls[b])]
		return n, t.out[n]
	}
	// word mode: s >= 0 is a trie node of the current word, -1 a word that
	// is no banned word's prefix.
	if isWordByte(b) {
		if s < 0 {
			return -1, false
		}
		nx := t.trie.Child(s, foldByte(b))
		return nx, false
	}
	if s >= 0 && t.trie.Nodes[s].Value >= 0 {
		return s, true
	}
	return 0, false
}

// find returns a banned word in text, or "".
func (t *toxSpec) find(text []byte) string {
	s := int32(0)
	for _, b := range text {
		var hit bool
		if s, hit = t.next(s, b); hit {
			return t.wordOf(s)
		}
	}
	if t.mode == toxWord && s >= 0 && t.trie.Nodes[s].Value >= 0 {
		return t.words[t.trie.Nodes[s].Value]
	}
	return ""
}

func (t *toxSpec) wordOf(s int32) string {
	if t.mode == toxBlock {
		if w := t.wordAt[s]; w >= 0 {
			return t.words[w]
		}
		return "?"
	}
	if v := t.trie.Nodes[s].Value; v >= 0 {
		return t.words[v]
	}
	return "?"
}

// toxRun is a generation's automaton state.
type toxRun struct {
	t *toxSpec
	s int32
	w toxWalker
}

func newToxRun(t *toxSpec) *toxRun { return &toxRun{t: t} }

func (r *toxRun) Reset() { r.s = 0 }

type toxWalker struct {
	t  *toxSpec
	st []int32
}

func (w *toxWalker) Step(k int, b byte, _ int32) bool {
	n, hit := w.t.next(w.st[k-1], b)
	if hit {
		return false
	}
	w.st[k] = n
	return true
}

// Mask fills dst with the allowed tokens (every token that is not text is
// allowed) and reports whether any token is banned.
func (r *toxRun) Mask(dst []uint64, f *limit.Fuel) (bool, error) {
	t := r.t
	vi := t.vi
	key := vocab.LeafKey{Owner: t, Detail: r.s}
	e := t.cache.Get(key)
	if e == nil {
		w := &r.w
		if len(w.st) < vi.MaxLen+2 {
			w.st = make([]int32, vi.MaxLen+2)
		}
		w.t = t
		w.st[0] = r.s
		inside := make([]uint64, vi.Words)
		if err := vi.Walk(-1, w, inside, f); err != nil {
			return false, err
		}
		vi.OrNoText(inside)
		e = t.cache.Put(key, &vocab.LeafEntry{Inside: inside}, t.mem)
	}
	copy(dst, e.Inside)
	return vocab.MaskCount(e.Inside) < vi.Size, nil
}

// Accept advances by a token's bytes; false when they complete a banned
// word.
func (r *toxRun) Accept(p []byte) bool {
	for _, b := range p {
		var hit bool
		if r.s, hit = r.t.next(r.s, b); hit {
			return false
		}
	}
	return true
}

// CanEnd reports whether the output may end here (in word mode, not right
// after a banned word).
func (r *toxRun) CanEnd() bool {
	if r.t.mode == toxWord && r.s >= 0 && r.t.trie.Nodes[r.s].Value >= 0 {
		return false
	}
	return true
}

// newWordRedactor returns the redact-mode text filter.
func newWordRedactor(t *toxSpec, hold int) textFilter { return newPIIRun(t.redact, hold) }
