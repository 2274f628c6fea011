package tools

// The compiled form of a JSON Schema: a graph of nodes (cycles come from
// recursive $ref), each the set of JSON values one subschema allows,
// restricted to what the grammar can follow. Nodes are immutable once
// compiled and shared by every run.

type nodeKind uint8

const (
	kNever  nodeKind = iota // no value
	kAlt                    // any of alts
	kString                 // a string
	kNumber                 // a number
	kObject                 // an object
	kArray                  // an array
	kLit                    // one of a finite set of literal texts
)

type node struct {
	kind  nodeKind
	id    int32
	path  string    // JSON pointer of the (first) subschema, for messages
	first [4]uint64 // bytes a value of this node may start with
	// building is set while the node's fields are being filled in (a cycle
	// may reach it then).
	building bool

	alts []*node
	str  *strSpec
	num  *numSpec
	obj  *objSpec
	arr  *arrSpec
	lit  *litSpec
}

func (n *node) firstHas(c byte) bool { return n.first[c>>6]&(1<<(c&63)) != 0 }

func (n *node) setFirst(c byte) { n.first[c>>6] |= 1 << (c & 63) }

// strSpec constrains a string's decoded content.
type strSpec struct {
	minLen, maxLen int32 // in code points; maxLen maxInt32 when unbounded
	dfa            *dfa  // nil: any content
}

// objSpec constrains an object.
type objSpec struct {
	props    []objProp
	keys     *byteTrie // canonical key bytes -> prop index
	under    []uint64  // per key-trie node (words each): props below it
	words    int       // (len(props)+63)/64, at least 1
	required []uint64  // bitset over props
	nreq     int
	minProps int32
	maxProps int32
	deps     []objDep
	// Additional keys (not in props): the value node for each combination
	// of patternProperties matched (bit i: pattern i), kNever when such a
	// key is not allowed.
	combos  []*node
	npat    int
	keyDFA  *dfa // components: npat patterns, then propertyNames checks
	pnMin   int32
	pnMax   int32
	freeKey bool // some additional key may be allowed
}

type objProp struct {
	name string
	node *node
}

type objDep struct {
	if_  int   // prop index
	then []int // prop indexes required when if_ is present
}

// arrSpec constrains an array.
type arrSpec struct {
	prefix   []*node
	items    *node // after the prefix; kNever when no more items
	minItems int32
	maxItems int32
	// unique, when set, makes items pairwise distinct; every item node is
	// then a kLit node and uniq maps (node, literal) to a value number.
	unique bool
	uniq   map[*node][]int32
	// contains: at least minContains items must belong to contains[i]
	// (the item's node and the contains schema together); the array frame
	// counts them in aux.
	contains    []*node // per prefix index, then the rest
	minContains int32
}

// containsNode returns the node an item i counted by contains must match.
func (a *arrSpec) containsNode(i int32) *node {
	if len(a.contains) == 0 {
		return nil
	}
	if int(i) < len(a.contains)-1 {
		return a.contains[i]
	}
	return a.contains[len(a.contains)-1]
}

// itemNode returns the node of item i.
func (a *arrSpec) itemNode(i int32) *node {
	if int(i) < len(a.prefix) {
		return a.prefix[i]
	}
	return a.items
}

// litSpec is a finite set of JSON texts: each literal value is written in
// every canonical form (sorted keys, and document order) it has.
type litSpec struct {
	trie   *byteTrie // text -> value index
	values []any
	keys   []string // valueKey of each value
	// under[t] has bit i when value i is below trie node t (at most 64
	// values), so that an item of a uniqueItems array avoids values it
	// already holds.
	under []uint64
}

// byteTrie maps byte strings to values. Node 0 is the root.
type byteTrie struct {
	nodes []btNode
}

type btNode struct {
	kids []btEdge
	term int32 // value index ending here, -1 for none
}

type btEdge struct {
	b    byte
	node int32
}

func newByteTrie() *byteTrie {
	return &byteTrie{nodes: []btNode{{term: -1}}}
}

// add inserts s with value v; a string already present keeps its value.
func (t *byteTrie) add(s []byte, v int32) {
	n := int32(0)
	for _, c := range s {
		next := t.child(n, c)
		if next < 0 {
			next = int32(len(t.nodes))
			t.nodes = append(t.nodes, btNode{term: -1})
			t.nodes[n].kids = append(t.nodes[n].kids, btEdge{c, next})
		}
		n = next
	}
	if t.nodes[n].term < 0 {
		t.nodes[n].term = v
	}
}

// child returns the child of n by c, or -1.
func (t *byteTrie) child(n int32, c byte) int32 {
	for _, e := range t.nodes[n].kids {
		if e.b == c {
			return e.node
		}
	}
	return -1
}

// lookup returns the value of s, or -1.
func (t *byteTrie) lookup(s []byte) int32 {
	n := int32(0)
	for _, c := range s {
		if n = t.child(n, c); n < 0 {
			return -1
		}
	}
	return t.nodes[n].term
}
