package tools

import "fmt"

// regexError is a pattern that cannot be compiled.
type regexError struct {
	Pattern string
	Msg     string
}

func (e *regexError) Error() string {
	p := e.Pattern
	if len(p) > 80 {
		p = p[:77] + "..."
	}
	return fmt.Sprintf("pattern %q: %s", p, e.Msg)
}
