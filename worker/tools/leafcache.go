package tools

import "sync"

// Masks inside a lexical leaf (a JSON string or key, an XML text run, a
// regex state) depend only on the leaf's own state, not on what encloses
// it, except for the tokens that leave the leaf (a closing quote, a '<').
// So the walk over the vocabulary is done once per leaf state and cached:
// inside holds the tokens that stay in the leaf and keep it alive; exits
// lists the trie nodes where the leaf ends (with what it produced), whose
// remaining bytes are checked against the enclosing state at run time.
// A free JSON string costs one OR of the cached bitset and a few hundred
// short checks instead of a walk over the whole vocabulary.

type leafExit struct {
	node    int32 // trie node of the byte that ends the leaf
	payload int32 // what the leaf produced (a key's property, ...)
}

type leafEntry struct {
	inside []uint64
	exits  []leafExit
}

// leafKey identifies a leaf state. owner is the grammar node (nil for the
// vocabulary-wide free string); the other fields are the leaf's state with
// counters clamped to what one token can change.
type leafKey struct {
	owner      any
	kind, ph   uint8
	u8, u8lo   uint8
	u8hi, flag uint8
	aux        int32
	ds         *dstate
	rmin, rmax int32
	seen       uint64
	seenX      string
}

type leafCache struct {
	mu  sync.Mutex
	m   map[leafKey]*leafEntry
	max int
}

func (c *leafCache) init(max int) {
	c.m = make(map[leafKey]*leafEntry)
	c.max = max
}

func (c *leafCache) get(k leafKey) *leafEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// put stores e unless the cache is full or mem refuses its bytes; it
// returns the entry the cache holds for k afterwards (e or an earlier one).
func (c *leafCache) put(k leafKey, e *leafEntry, mem *meter) *leafEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if len(c.m) >= c.max {
		return e
	}
	if mem.charge(int64(len(e.inside)*8+len(e.exits)*8+96)) != nil {
		return e
	}
	c.m[k] = e
	return e
}
