// Package vocab is the vocabulary side of token masks: an Index built once
// per tokenizer (the token pieces, end-of-generation tokens, a byte trie of
// the pieces laid out in preorder (subtrees numbered by shape), and token classes for JSON strings), the
// packed bitset helpers every mask uses, and LeafCache, the cache of masks
// inside a lexical state.
//
// # Data flow
//
// IndexOf(source) builds (or finds in a small cache) the Index of a
// tokenizer. A constraint computes a mask by calling Index.Walk with a
// Stepper: the walk visits the trie in preorder, feeds each node's byte to
// the stepper (an automaton state, a parser thread, an XML scanner) and
// skips the subtree of any node the stepper refuses, setting the bits of
// the tokens that end at accepted nodes. Masks that depend only on a
// lexical state (inside a string, a key, a regex state, an XML text run)
// go into a LeafCache keyed by that state, so the next visit is a copy and
// a few short checks. Mask bitsets are []uint64, one bit per token;
// AndMask, OrMask, MaskHas and friends work on them in place, without
// allocating: they run per token in the decode loop.
//
// # Imports
//
// The standard library, worker/model/tokenizer (token types), limit (fuel
// for walks, a meter for cached masks) and automaton (ByteSet, and DFA
// states as leaf keys). The grammar and the tools package import it.
//
//	vi := vocab.IndexOf(tok)
//	mask := make([]uint64, vi.Words)
//	err := vi.Walk(-1, stepper, mask, fuel)
package vocab
