// Package schema compiles JSON Schemas to grammars and validates the
// finished output: the json_validator tool and response_format json_schema.
//
// # Data flow
//
// Compile decodes the schema (DecodeJSON keeps key order and exact
// numbers), indexes it (ids, anchors and JSON pointers, for local $ref),
// loads the validator (santhosh-tekuri/jsonschema) and compiles the root
// to grammar Nodes: a node comes from a conjunction of subschema
// locations (allOf merges, $ref follows; anyOf, oneOf, not, if/then/else
// and dependentSchemas distribute into alternatives, the last three over
// synthetic subschemas that logic.go builds: a negation, "key absent"),
// memoized by that set so recursive schemas become cyclic graphs. Strings
// get their pattern and format as one lazy DFA (formats.go lists the
// format patterns), numbers their bounds, objects their properties,
// patternProperties and key DFA, arrays their items. Whatever has enum or
// const becomes a literal set filtered by the validator. What the grammar
// leaves to the final validation (an overlapping oneOf, uniqueItems on
// objects, an if that does not negate) is noted. Unsupported keywords
// fail with an *Error naming the keyword and its pointer, or, in soft
// mode, are left out and noted. A schema no value satisfies fails with an
// *Error in either mode. The result is a grammar.Machine over the
// vocabulary and the Validator that checks the whole output at the end.
//
// # Imports
//
// The standard library, santhosh-tekuri/jsonschema, limit, automaton,
// vocab and grammar. Only the tools package imports it.
//
//	m, val, notes, err := schema.Compile(raw, soft, vi, schema.Limits{...}, clock)
//	run := grammar.NewRun(m)
//	// ... decode ...
//	err = val.ValidateText(output)
package schema
