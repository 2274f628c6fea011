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

type LeafExit struct {
	Node    int32 // trie node of the byte that ends the leaf
	Payload int32 // what the leaf produced (a key's property, ...)
}

type LeafEntry struct {
	Inside []uint64
	Exits  []LeafExit
}

// LeafKey identifies a leaf state. owner is the grammar node (nil for the
// vocabulary-wide free string); the other fields are the leaf's state with
// counters clamped to what one token can change.
type LeafKey struct {
	Owner      any
	Kind, Ph   uint8
	U8, U8lo   uint8
	U8hi, Flag uint8
	Aux        int32
	Ds         *automaton.State
	Rmin, Rmax int32
	Seen       uint64
	SeenX      string
}

type LeafCache struct {
	mu  sync.Mutex
	m   map[LeafKey]*LeafEntry
	max int
}

func (c *LeafCache) Init(max int) {
	c.m = make(map[LeafKey]*LeafEntry)
	c.max = max
}

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
	if mem.Charge(int64(len(e.Inside)*8+len(e.Exits)*8+96)) != nil {
		return e
	}
	c.m[k] = e
	return e
}
