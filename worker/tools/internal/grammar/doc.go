// Package grammar runs compiled JSON grammars against the vocabulary: a
// Machine is a graph of Nodes (strings, numbers, objects, arrays, literal
// sets and alternations, possibly cyclic) and a Run is one generation's
// parse of it, answering the mask of allowed tokens and accepting the
// sampled ones.
//
// # Data flow
//
// The schema package builds the Node graph (StrSpec, NumSpec, ObjSpec,
// ArrSpec, LitSpec carry each node's constraints) and hands it to
// NewMachine with a Layout (whitespace between tokens: none by default;
// an optional cap on unbounded strings and keys), which finishes the
// specs (the digits a number may take, an integer's bounds cut to int64,
// the cap applied). A Machine is immutable apart from its mask caches and
// is shared by every Run of a compiled tool. NewRun starts a parse with one
// thread per way the output can begin; Run.Mask walks the vocabulary trie
// (vocab.Index.Walk) with the live threads and fills the packed bitset of
// tokens that keep the output a prefix of a valid document (string and key
// leaves come from leaf caches); Run.Accept feeds a token's bytes to every
// thread, dropping the dead and forking at alternations (bounded by the
// thread cap, limit.ErrTooManyThreads). CanEnd and Complete say whether the
// output may stop, or must. An array with ArrSpec.UniqueScalars keeps the
// values of its scalar items in its frame (unique.go), so an item equal to
// an earlier one cannot end; the tokens that close a string item are
// checked one by one against them.
//
// Mask and Accept run once per generated token; they spend limit.Fuel and
// charge cached masks to the machine's limit.Meter.
//
// # Imports
//
// The standard library, limit, automaton (string patterns and key DFAs)
// and vocab. It knows nothing of JSON Schema keywords: that is the schema
// package, which imports it.
//
//	m := grammar.NewMachine(root, nodes, vi, mem, maxThreads, grammar.Layout{})
//	r := grammar.NewRun(m)
//	eog, err := r.Mask(mask, fuel)
//	ok, err := r.Accept(piece, fuel)
package grammar
