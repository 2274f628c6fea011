package grammar

import (
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
)

// The compiled form of a JSON Schema: a graph of nodes (cycles come from
// recursive $ref), each the set of JSON values one subschema allows,
// restricted to what the grammar can follow. Nodes are immutable once
// compiled and shared by every run.

// Kind is the kind of JSON value a Node stands for.
type Kind uint8

const (
	KindNever   Kind = iota // no value
	KindAlt                 // any of alts
	KindString              // a string
	KindNumber              // a number
	KindObject              // an object
	KindArray               // an array
	KindLiteral             // one of a finite set of literal texts
)

// Node is a set of JSON values the grammar can follow: one kind with its
// constraints (the spec of that kind), or an alternation of nodes.
type Node struct {
	// Kind says which spec below is set (Alts for KindAlt).
	Kind Kind
	// ID numbers the node within its machine.
	ID    int32
	First [4]uint64 // bytes a value of this node may start with
	// Building is set while the node's fields are being filled in (a cycle
	// may reach it then).
	Building bool

	// Alts are the alternatives of a KindAlt node.
	Alts []*Node
	// String, Number, Object, Array and Literal are the constraints of
	// the node's kind; only the one of its Kind is set.
	String  *StrSpec
	Number  *NumSpec
	Object  *ObjSpec
	Array   *ArrSpec
	Literal *LitSpec
}

func (n *Node) firstHas(c byte) bool { return n.First[c>>6]&(1<<(c&63)) != 0 }

// SetFirst records that a value of n may start with byte c.
func (n *Node) SetFirst(c byte) { n.First[c>>6] |= 1 << (c & 63) }

// StrSpec constrains a string's decoded content.
type StrSpec struct {
	MinLen, MaxLen int32          // in code points; maxLen maxInt32 when unbounded
	DFA            *automaton.DFA // nil: any content
}

// ObjSpec constrains an object.
type ObjSpec struct {
	// Props are the named properties, in schema order.
	Props     []ObjProp
	Keys      *ByteTrie // canonical key bytes -> prop index
	KeysUnder []uint64  // per key-trie node (words each): props below it
	Words     int       // (len(props)+63)/64, at least 1
	Required  []uint64  // bitset over props
	// NumRequired is the number of required properties.
	NumRequired int
	// MinProps and MaxProps bound the number of properties.
	MinProps int32
	MaxProps int32
	// Dependencies are dependentRequired: properties a present one requires.
	Dependencies []ObjDep
	// Additional keys (not in props): the value node for each combination
	// of patternProperties matched (bit i: pattern i), kNever when such a
	// key is not allowed.
	PatternCombos []*Node
	// NumPatterns is the number of patternProperties patterns.
	NumPatterns int
	KeyDFA      *automaton.DFA // components: npat patterns, then propertyNames checks
	// MinKeyLen and MaxKeyLen bound an additional key's length in code
	// points (propertyNames minLength and maxLength).
	MinKeyLen int32
	MaxKeyLen int32
	FreeKey   bool // some additional key may be allowed
	// longKeys (set by NewMachine) says some named property is longer
	// than MaxKeyLen: on the known-key trie, token length is then no
	// guide.
	longKeys bool
}

// ObjProp is a named property and the node of its value.
type ObjProp struct {
	Name string
	Node *Node
}

// ObjDep is one dependentRequired entry.
type ObjDep struct {
	If   int   // prop index
	Then []int // prop indexes required when if_ is present
}

// ArrSpec constrains an array.
type ArrSpec struct {
	// Prefix are the nodes of the first items (prefixItems).
	Prefix []*Node
	Items  *Node // after the prefix; kNever when no more items
	// MinItems and MaxItems bound the number of items.
	MinItems int32
	MaxItems int32
	// Unique, when set, makes items pairwise distinct; every item node is
	// then a KindLiteral node and ValueIDs maps (node, literal) to a value number.
	Unique   bool
	ValueIDs map[*Node][]int32
	// UniqueScalars, when set, makes every string, number, boolean or null
	// item differ from the earlier ones (the array frame keeps their
	// canonical values); object and array items are left to the final
	// validation.
	UniqueScalars bool
	// Contains: at least minContains items must belong to contains[i]
	// (the item's node and the contains schema together); the array frame
	// counts them in aux.
	Contains []*Node // per prefix index, then the rest
	// MinContains is the least number of items that must match Contains.
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
	Trie *ByteTrie // text -> value index
	// Values are the literal values, by value index.
	Values    []any
	ValueKeys []string // valueKey of each value
	// Under[t] has bit i when value i is below trie node t (at most 64
	// values), so that an item of a uniqueItems array avoids values it
	// already holds.
	Under []uint64
}

// ByteTrie maps byte strings to values. Node 0 is the root.
type ByteTrie struct {
	// Nodes holds the trie's nodes; node 0 is the root.
	Nodes []TrieNode
}

// TrieNode is a node of a ByteTrie.
type TrieNode struct {
	// Edges lead to the node's children, one per byte.
	Edges []TrieEdge
	Value int32 // value index ending here, -1 for none
}

// TrieEdge is the edge to a child of a TrieNode.
type TrieEdge struct {
	// Byte labels the edge.
	Byte byte
	// Node is the child's index in ByteTrie.Nodes.
	Node int32
}

// NewByteTrie returns an empty trie (just the root).
func NewByteTrie() *ByteTrie {
	return &ByteTrie{Nodes: []TrieNode{{Value: -1}}}
}

// Add inserts s with value v; a string already present keeps its value.
func (t *ByteTrie) Add(s []byte, v int32) {
	n := int32(0)
	for _, c := range s {
		next := t.Child(n, c)
		if next < 0 {
			next = int32(len(t.Nodes))
			t.Nodes = append(t.Nodes, TrieNode{Value: -1})
			t.Nodes[n].Edges = append(t.Nodes[n].Edges, TrieEdge{c, next})
		}
		n = next
	}
	if t.Nodes[n].Value < 0 {
		t.Nodes[n].Value = v
	}
}

// Child returns the child of n by c, or -1.
func (t *ByteTrie) Child(n int32, c byte) int32 {
	for _, e := range t.Nodes[n].Edges {
		if e.Byte == c {
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
	return t.Nodes[n].Value
}
