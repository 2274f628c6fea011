package schema

import "fmt"

// Error is a JSON Schema that cannot be compiled: an unsupported
// keyword, or a construct outside what the grammar can express, at a JSON
// pointer into the schema.
type Error struct {
	keyword string // the keyword at fault, e.g. "uniqueItems"
	path    string // JSON pointer of the subschema holding it
	msg     string
}

func (e *Error) Error() string {
	p := e.path
	if p == "" {
		p = "/"
	}
	if e.keyword == "" {
		return fmt.Sprintf("at %s: %s", p, e.msg)
	}
	return fmt.Sprintf("keyword %q at %s: %s", e.keyword, p, e.msg)
}
