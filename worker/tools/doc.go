// Package tools runs a job's inline tools inside the decode loop: output
// rules act at the logits (a token mask) and on the decoded text stream,
// so the output is valid by construction and nothing downstream has to
// re-parse, retry or clean it.
//
// # The tools
//
//   - json_validator {schema} (and response_format json_schema): the JSON
//     Schema is compiled to a grammar over the vocabulary's bytes; the mask
//     allows exactly the tokens that keep the output a prefix of some valid
//     document, and the output is validated again at the end with
//     santhosh-tekuri/jsonschema. Supported: type, properties, required,
//     additionalProperties, patternProperties, propertyNames (string
//     constraints), min/maxProperties, dependentRequired and array-form
//     dependencies, enum, const, items, prefixItems (and draft 4-2019
//     tuple items / additionalItems), min/maxItems, uniqueItems on
//     enum/const items, contains: true/false, min/maxLength (counters, not
//     unrolled states: maxLength 100000 costs what an unbounded string
//     costs), pattern, format (date, date-time, time, email, hostname,
//     ipv4, ipv6, uuid, uri, iri, uri-reference, iri-reference,
//     json-pointer, duration), minimum/maximum/exclusive*, multipleOf,
//     anyOf, allOf (merged), oneOf with provably disjoint branches,
//     not {type}, local $ref (JSON pointers, $id, $anchor). Any keyword
//     next to enum/const is handled exactly (the literals are filtered by
//     the validator). Other validation keywords are a compile error naming
//     the keyword and its JSON pointer; in soft mode the keyword is left
//     out and the report says "constraint: soft". Object keys may come in
//     any order; whitespace between tokens is allowed (at most 64 bytes at
//     a time), not after the top-level value. With a trigger (param
//     trigger, response_format.trigger) the schema binds only output that
//     starts with it: free text that does not start with the trigger, or
//     the trigger and a valid document (trigger.go); the gateways' tool
//     calls with tool_choice auto.
//   - regex_matcher {pattern}: the whole output matches an RE2 pattern. The
//     pattern's size is estimated right after parsing and oversized ones
//     are rejected before anything is built; the automaton is a lazy
//     byte-level DFA with a cap on cached states.
//   - xml_validator {allowed_tags}: text with only the listed tags,
//     properly nested and closed.
//   - toxicity_filter {words, mode}: banned words can never be produced,
//     whatever tokens spell them (mode "block", the default: anywhere,
//     case-insensitive; "word": as whole words), or (mode "redact") are
//     replaced in the text stream.
//   - pii_redactor {entities, patterns}: e-mail addresses, phone numbers,
//     credit cards (Luhn), IBANs (mod 97), Chinese resident ids (check
//     digit), US SSNs and custom patterns are redacted as the text streams,
//     holding back only what could still become a match; fails closed.
//   - retry_on_fail {output_contains, max_retries}: the engine regenerates
//     when the output contains a marker.
//   - suffix {text}: appended after generation; always last.
//
// # Data flow
//
// Compile turns a job's declarations (tools[], response_format, and the
// <tool> blocks contracts.ParseSystem took out of the system prompt) into
// a Set for one vocabulary; compiled tools are cached by (parameters hash,
// vocabulary, budget). A Set is immutable and shared; each generation
// takes a Run. Per step the engine calls Mask (packed bitset, one bit per
// token), samples, calls Accept with the token, and passes the decoded text
// through Text; Complete says when a constraint admits nothing more. At
// the end Finish flushes held-back text, validates, and returns the tail
// (the suffix last). Retry and Reset implement retry_on_fail; Report,
// TimeMs and Events feed the final event, usage and tool events.
//
// A Run is not safe for concurrent use, but its calls may come from any
// goroutine, so the engine can compute the next mask while the forward
// pass runs. Masks are computed by walking a byte trie of the vocabulary
// (built once per vocabulary) against the automaton state; the masks of
// lexical states (inside a string or key, an XML text run, a regex state)
// are cached, so a mask in the middle of a string is a copy and a few
// hundred short checks.
//
// # Layout
//
// This package is the public face: Compile and the compile cache
// (compile.go), Run and its per-token calls (run.go), Budget, errors, and
// the small tools (xml.go, toxicity.go, pii.go, regexrun.go, retry.go).
// The system-prompt DSL that declares tools inline is part of the wire
// contract (contracts.ParseSystem), so that producers count the prompt
// without its blocks and refuse a malformed one at submit. The machinery lives in rooms under
// internal/, each importing only the rooms below it:
//
//	limit       fuel, memory meter and compile clock, with their sentinels
//	automaton   RE2 patterns to byte programs, run as lazy DFAs
//	vocab       the vocabulary trie, mask bitsets, leaf mask caches
//	grammar     the JSON grammar machine: mask and accept per token
//	schema      JSON Schema to grammar, and the final validator
//
// and toolstest, what their tests and this package's share (the ../shared
// test data, the JSON-Schema-Test-Suite, a regex search through the lazy
// DFA), imported only by tests. Each room's tests live beside it.
//
// The seam between a Run and a constraint is the constraint interface in
// run.go (Mask, Accept, CanEnd, Complete, Reset): grammar.Run implements it
// for JSON, regexRun and xmlRun here for the other masking tools. Limit
// sentinels travel up unchanged and become contract errors in errors.go.
//
// # Budgets and failures
//
// Every job's tools run under a Budget: memory (compiled automata, caches,
// parser threads), step fuel per call, compile time, pattern size, DFA
// states. Going over fails that job alone with a *contracts.Error
// (tool_execution_failed with TOOL_MEMORY_EXHAUSTED, TOOL_STEP_BUDGET or
// TOOL_TIMEOUT); the other jobs in the batch go on. Run.Failure keeps the
// first failure for the result's tool_failure_reason.
//
// Memory and step fuel are per pool: the tools of a job with the same
// context_id share them, tools of different context_ids are budgeted
// apart (and compiled apart), so one tool exhausting its pool does not
// starve the others. Tools without a context_id share the default pool's
// step fuel, each with a memory cap of its own.
//
// # Example
//
//	set, err := tools.Compile(req.Tools, req.ResponseFormat, tok, tools.Budget{})
//	run := set.NewRun()
//	mask := make([]uint64, (tok.VocabSize()+63)/64)
//	for !run.Complete() {
//		if constrained, err := run.Mask(mask); constrained { /* apply mask */ }
//		id := sample(logits)
//		if err := run.Accept(id); err != nil { /* fail the job */ }
//		if tok.IsEOG(id) { break }
//		out, _ := run.Text(decoder.Add(id))
//		emit(out)
//	}
//	tail, err := run.Finish()
package tools
