package schema

import (
	"encoding/json"

	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Limits are the parts of the tools' budget that compiling a schema
// spends. Every field must be set (the tools package passes its budget
// with defaults applied).
type Limits struct {
	// MaxSchemaNodes caps the grammar nodes a schema compiles to.
	MaxSchemaNodes int
	// MaxPatternBytes caps the source text of a pattern or format regex.
	MaxPatternBytes int
	// MaxRegexInsts caps the estimated program of one regex (four times it
	// for the intersection of a string's pattern and format).
	MaxRegexInsts int
	// MaxDFAStates caps the states each lazy DFA keeps cached.
	MaxDFAStates int
	// MaxMemoryBytes caps the memory of the compiled machine and its caches.
	MaxMemoryBytes int64
	// MaxThreads caps the parser threads the machine follows at once.
	MaxThreads int
	// Layout is how the output is written where the schema leaves a
	// choice (whitespace, a cap on unbounded strings); the zero Layout is
	// compact and uncapped.
	Layout grammar.Layout
}

// Compile compiles the JSON Schema raw to a grammar machine over
// vi, and the validator that checks the finished output. The notes name
// what the grammar leaves to the validator (in either mode) and, in soft
// mode, the unsupported keywords left out instead of failing. A schema no
// value satisfies is an *Error naming the pointer (of an empty enum when
// one is the cause). Errors are an *Error, or a limit sentinel.
func Compile(raw json.RawMessage, soft bool, vi *vocab.Index, lim Limits, clock *limit.Clock) (*grammar.Machine, *Validator, []string, error) {
	root, err := DecodeJSON(raw)
	if err != nil {
		return nil, nil, nil, &Error{msg: "schema is not valid JSON: " + err.Error()}
	}
	switch root.(type) {
	case *jsonObject, bool:
	default:
		return nil, nil, nil, &Error{msg: "schema must be a JSON object or a boolean"}
	}
	doc, err := newSchemaDoc(root)
	if err != nil {
		return nil, nil, nil, err
	}
	val, err := newValidator(raw, doc.rootURL, nil, false)
	if err != nil {
		return nil, nil, nil, &Error{msg: "schema cannot be loaded: " + err.Error()}
	}
	if _, err := val.at(""); err != nil {
		return nil, nil, nil, &Error{msg: "schema does not compile: " + err.Error()}
	}
	mem := limit.NewMeter(lim.MaxMemoryBytes)
	c := newSchemaCompiler(doc, val, soft, lim, clock, mem)
	n, err := c.compile([]*sloc{doc.byPtr[""]})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := clock.CheckNow(); err != nil {
		return nil, nil, nil, err
	}
	if c.memErr != nil {
		return nil, nil, nil, c.memErr
	}
	c.finish()
	if n.Kind == grammar.KindNever {
		if c.emptyEnum != "" {
			return nil, nil, nil, &Error{keyword: "enum", path: c.emptyEnum, msg: "enum is empty: no value satisfies the schema"}
		}
		return nil, nil, nil, &Error{path: "/", msg: "no value satisfies the schema (a false schema, or a required part that nothing satisfies)"}
	}
	return grammar.NewMachine(n, c.all, vi, mem, lim.MaxThreads, lim.Layout), val, c.notes, nil
}
