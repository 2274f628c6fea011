package vocab

import (
	"sync"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// Masks inside a lexical leaf (a JSON string or key, an XML text run, a
// regex state) depend only on the leaf's own state, not on what encloses
// it, except for the tokens that leave the leaf (a closing quote, a '<').
// So the walk over the vocabulary is done once per leaf state and cached:
// inside holds the tokens that stay in the leaf and keep it alive; exits
// lists the trie nodes where the leaf ends (with what it produced), whose
// remaining bytes are checked against the enclosing state at run time.
// A free JSON string costs one OR of the cached bitset and a few hundred
// short checks instead of a walk over the whole vocabulary.

// LeafExit is a trie node where a leaf ends inside a token.
type LeafExit struct {
	Node    int32 // trie node of the byte that ends the leaf
	Payload int32 // what the leaf produced (a key's property, ...)
}

// LeafEntry is the cached mask of a leaf state.
type LeafEntry struct {
	// Inside are the tokens that stay inside the leaf. It may be shared
	// with the Index (SharedInside): never write to it.
	Inside []uint64
	// Extra are more tokens that stay inside, besides Inside.
	Extra []int32
	// SharedInside says Inside belongs to the Index (not charged to the
	// cache's meter).
	SharedInside bool
	// Exits are where the other allowed tokens leave it.
	Exits []LeafExit
}

// LeafKey identifies a leaf state. Owner is what the leaf belongs to (nil for the
// vocabulary-wide free string); the other fields are the leaf's state with
// counters clamped to what one token can change.
type LeafKey struct {
	// Owner is what the leaf belongs to: a grammar node, a string's DFA, or
	// another constraint.
	Owner any
	// Kind and Phase are the lexical state and its phase.
	Kind, Phase uint8
	// UTF8Pending is the continuation bytes still expected; UTF8Lo and
	// UTF8Hi the range of the next one; Flag the state's flags.
	UTF8Pending, UTF8Lo uint8
	UTF8Hi, Flag        uint8
	// Detail is the kind-specific part: a trie node, property or hex
	// accumulator.
	Detail int32
	// DFAState is the pattern's DFA state, nil without a pattern.
	DFAState *automaton.State
	// MinLeft and MaxLeft are the code points still required and still
	// allowed, clamped to what one token can change.
	MinLeft, MaxLeft int32
	// Seen and SeenExtra are the object's properties seen so far (zero
	// where they cannot change the entry: objects that take any key).
	Seen      uint64
	SeenExtra string
}

// LeafCache caches LeafEntries by LeafKey, up to a maximum count. It is
// safe for concurrent use.
type LeafCache struct {
	mu  sync.Mutex
	m   map[LeafKey]*LeafEntry
	max int
}

// Init empties the cache and sets its capacity to max entries.
func (c *LeafCache) Init(max int) {
	c.m = make(map[LeafKey]*LeafEntry)
	c.max = max
}

// Get returns the entry of k, or nil.
func (c *LeafCache) Get(k LeafKey) *LeafEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// Put stores e unless the cache is full or mem refuses its bytes; it
// returns the entry the cache holds for k afterwards (e or an earlier one).
func (c *LeafCache) Put(k LeafKey, e *LeafEntry, mem *limit.Meter) *LeafEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if len(c.m) >= c.max {
		return e
	}
	n := len(e.Inside)*8 + len(e.Extra)*4 + len(e.Exits)*8 + 96
	if e.SharedInside {
		n -= len(e.Inside) * 8
	}
	if mem.Charge(int64(n)) != nil {
		return e
	}
	c.m[k] = e
	return e
}
