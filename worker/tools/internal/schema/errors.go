package schema

import "fmt"

// Error is a JSON Schema that cannot be compiled: an unsupported
// keyword, or a construct outside what the grammar can express, at a JSON
// pointer into the schema.
type Error struct {
	Keyword string // the keyword at fault, e.g. "uniqueItems"
	Path    string // JSON pointer of the subschema holding it
	Msg     string
}

func (e *Error) Error() string {
	p := e.Path
	if p == "" {
		p = "/"
	}
	if e.Keyword == "" {
		return fmt.Sprintf("at %s: %s", p, e.Msg)
	}
	return fmt.Sprintf("keyword %q at %s: %s", e.Keyword, p, e.Msg)
}
