package toolstest

import (
	"regexp/syntax"
	"time"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
)

// SearchLimits bound a RegexSearch, as a job's Budget bounds regex_matcher.
// Every field must be set.
type SearchLimits struct {
	// Pattern bounds the pattern before it is compiled.
	Pattern automaton.Limits
	// CompileTimeout caps the compile.
	CompileTimeout time.Duration
	// MaxDFAStates caps the states the DFA caches.
	MaxDFAStates int
	// MaxMemoryBytes caps the memory the DFA holds (half of it for states).
	MaxMemoryBytes int64
	// MaxStepFuel caps the steps of the whole search.
	MaxStepFuel int64
}

// RegexSearch reports whether pattern matches somewhere in input (Go's
// MatchString semantics), running the lazy DFA under l.
func RegexSearch(pattern, input string, l SearchLimits) (bool, error) {
	clock := limit.NewClock(l.CompileTimeout)
	re, err := automaton.Parse(pattern, l.Pattern)
	if err != nil {
		return false, err
	}
	prog, err := automaton.Compile([]*syntax.Regexp{re}, []automaton.Mode{automaton.ModeSearch}, l.Pattern, clock)
	if err != nil {
		return false, err
	}
	mem := limit.NewMeter(l.MaxMemoryBytes)
	d := automaton.NewDFA(prog, l.MaxDFAStates, l.MaxMemoryBytes/2, mem)
	f := limit.NewFuel(l.MaxStepFuel)
	s := d.Start
	var work int64
	for i := 0; i < len(input); i++ {
		s = d.Step(s, input[i], &work)
		if err := f.Spend(1 + work); err != nil {
			return false, err
		}
		work = 0
		if s.Live == 0 {
			return false, nil
		}
	}
	return d.AcceptAll(s), nil
}
