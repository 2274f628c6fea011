package automaton

import "fmt"

// PatternError is a pattern that cannot be compiled.
type PatternError struct {
	// Pattern is the source text of the pattern.
	Pattern string
	// Message says what is wrong with it.
	Message string
}

func (e *PatternError) Error() string {
	p := e.Pattern
	if len(p) > 80 {
		p = p[:77] + "..."
	}
	return fmt.Sprintf("pattern %q: %s", p, e.Message)
}
