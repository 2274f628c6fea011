package grammar

import (
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
)

// The compiled form of a JSON Schema: a graph of nodes (cycles come from
// recursive $ref), each the set of JSON values one subschema allows,
// restricted to what the grammar can follow. Nodes are immutable once
// compiled and shared by every run.

type Kind uint8

const (
	KindNever  Kind = iota // no value
	KindAlt                // any of alts
	KindString             // a string
	KindNumber             // a number
	KindObject             // an object
	KindArray              // an array
	KindLit                // one of a finite set of literal texts
)

type Node struct {
	Kind  Kind
	ID    int32
	Path  string    // JSON pointer of the (first) subschema, for messages
	First [4]uint64 // bytes a value of this node may start with
	// Building is set while the node's fields are being filled in (a cycle
	// may reach it then).
	Building bool

	Alts []*Node
	Str  *StrSpec
	Num  *NumSpec
	Obj  *ObjSpec
	Arr  *ArrSpec
	Lit  *LitSpec
}

func (n *Node) firstHas(c byte) bool { return n.First[c>>6]&(1<<(c&63)) != 0 }

func (n *Node) SetFirst(c byte) { n.First[c>>6] |= 1 << (c & 63) }

// StrSpec constrains a string's decoded content.
type StrSpec struct {
	MinLen, MaxLen int32          // in code points; maxLen maxInt32 when unbounded
	Dfa            *automaton.DFA // nil: any content
}

// ObjSpec constrains an object.
type ObjSpec struct {
	Props    []ObjProp
	Keys     *ByteTrie // canonical key bytes -> prop index
	Under    []uint64  // per key-trie node (words each): props below it
	Words    int       // (len(props)+63)/64, at least 1
	Required []uint64  // bitset over props
	Nreq     int
	MinProps int32
	MaxProps int32
	Deps     []ObjDep
	// Additional keys (not in props): the value node for each combination
	// of patternProperties matched (bit i: pattern i), kNever when such a
	// key is not allowed.
	Combos  []*Node
	Npat    int
	KeyDFA  *automaton.DFA // components: npat patterns, then propertyNames checks
	PnMin   int32
	PnMax   int32
	FreeKey bool // some additional key may be allowed
}

type ObjProp struct {
	Name string
	Node *Node
}

type ObjDep struct {
	If   int   // prop index
	Then []int // prop indexes required when if_ is present
}

// ArrSpec constrains an array.
type ArrSpec struct {
	Prefix   []*Node
	Items    *Node // after the prefix; kNever when no more items
	MinItems int32
	MaxItems int32
	// Unique, when set, makes items pairwise distinct; every item node is
	// then a kLit node and uniq maps (node, literal) to a value number.
	Unique bool
	Uniq   map[*Node][]int32
	// Contains: at least minContains items must belong to contains[i]
	// (the item's node and the contains schema together); the array frame
	// counts them in aux.
	Contains    []*Node // per prefix index, then the rest
	MinContains int32
}

// containsNode returns the node an item i counted by contains must match.
func (a *ArrSpec) containsNode(i int32) *Node {
	if len(a.Contains) == 0 {
		return nil
	}
	if int(i) < len(a.Contains)-1 {
		return a.Contains[i]
	}
	return a.Contains[len(a.Contains)-1]
}

// ItemNode returns the node of item i.
func (a *ArrSpec) ItemNode(i int32) *Node {
	if int(i) < len(a.Prefix) {
		return a.Prefix[i]
	}
	return a.Items
}

// LitSpec is a finite set of JSON texts: each literal value is written in
// every canonical form (sorted keys, and document order) it has.
type LitSpec struct {
	Trie   *ByteTrie // text -> value index
	Values []any
	Keys   []string // valueKey of each value
	// Under[t] has bit i when value i is below trie node t (at most 64
	// values), so that an item of a uniqueItems array avoids values it
	// already holds.
	Under []uint64
}

// ByteTrie maps byte strings to values. Node 0 is the root.
type ByteTrie struct {
	Nodes []btNode
}

type btNode struct {
	Kids []btEdge
	Term int32 // value index ending here, -1 for none
}

type btEdge struct {
	B    byte
	Node int32
}

func NewByteTrie() *ByteTrie {
	return &ByteTrie{Nodes: []btNode{{Term: -1}}}
}

// Add inserts s with value v; a string already present keeps its value.
func (t *ByteTrie) Add(s []byte, v int32) {
	n := int32(0)
	for _, c := range s {
		next := t.Child(n, c)
		if next < 0 {
			next = int32(len(t.Nodes))
			t.Nodes = append(t.Nodes, btNode{Term: -1})
			t.Nodes[n].Kids = append(t.Nodes[n].Kids, btEdge{c, next})
		}
		n = next
	}
	if t.Nodes[n].Term < 0 {
		t.Nodes[n].Term = v
	}
}

// Child returns the child of n by c, or -1.
func (t *ByteTrie) Child(n int32, c byte) int32 {
	for _, e := range t.Nodes[n].Kids {
		if e.B == c {
			return e.Node
		}
	}
	return -1
}

// Lookup returns the value of s, or -1.
func (t *ByteTrie) Lookup(s []byte) int32 {
	n := int32(0)
	for _, c := range s {
		if n = t.Child(n, c); n < 0 {
			return -1
		}
	}
	return t.Nodes[n].Term
}
