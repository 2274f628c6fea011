package automaton

import "fmt"

// PatternError is a pattern that cannot be compiled.
type PatternError struct {
	Pattern string
	Msg     string
}

func (e *PatternError) Error() string {
	p := e.Pattern
	if len(p) > 80 {
		p = p[:77] + "..."
	}
	return fmt.Sprintf("pattern %q: %s", p, e.Msg)
}
