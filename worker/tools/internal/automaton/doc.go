// Package automaton compiles RE2 patterns to byte-level programs and runs
// them as lazy DFAs: regex_matcher, JSON Schema pattern and format
// constraints, patternProperties and propertyNames, and the pii_redactor's
// detectors all end up here.
//
// # Data flow
//
// Parse checks a pattern's length, parses it with regexp/syntax and
// estimates its program size before anything is built (oversized patterns
// fail with a *PatternError). Compile turns one or more parsed patterns
// into a Program whose components run side by side (ModeFull: the whole
// input must match; ModeSearch: some substring must). NewDFA wraps a
// Program in a lazy DFA: a State is built on first use and cached with its
// transitions under a cap on states and bytes (charged to a limit.Meter);
// past the cap states are rebuilt on every visit, slower but bounded. A DFA
// is shared by every run of a compiled tool and safe for concurrent use.
// Step advances a State by one byte; LiveAll, AcceptAll and Terminal tell
// whether every component can still match, matches now, or can go no
// further.
//
// ByteSet, a 256-bit set of bytes, is shared with the vocabulary trie.
//
// # Imports
//
// The standard library and limit. It knows nothing of tokens, JSON or
// tools.
//
//	re, err := automaton.Parse(`[a-z]+@[a-z]+`, automaton.Limits{MaxBytes: 1 << 10, MaxInsts: 1000})
//	prog, err := automaton.Compile([]*syntax.Regexp{re}, []automaton.Mode{automaton.ModeFull}, lim, clock)
//	d := automaton.NewDFA(prog, 10_000, 32<<20, mem)
//	s := d.Start
//	for _, b := range input {
//		s = d.Step(s, b, &work)
//	}
//	matched := d.AcceptAll(s)
package automaton
