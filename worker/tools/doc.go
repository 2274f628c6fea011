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
//     santhosh-tekuri/jsonschema. The keywords are listed under JSON
//     Schema keywords below. Object keys may come in any order. Output is
//     compact by default: no whitespace between tokens (param whitespace,
//     response_format.whitespace: "compact", or "pretty" for runs of up to
//     64 whitespace bytes, enough for a newline and indentation); one
//     space may lead the document (a SentencePiece "▁{" costs no token),
//     nothing may follow it. Integers (a number whose multipleOf is an
//     integer) are written without fraction or exponent, so they decode
//     into an integer type. A number takes no more digits than the int64
//     or float64 it is read into holds: an integer is an int64 (followed
//     in int64 arithmetic); any other number has at most 17 digits
//     (integer part and fraction together; the 0 of "0.5" not counted),
//     enough to write any float64 so that it reads back the same, and an
//     exponent, where one is allowed, of at most 2 digits. Only a schema
//     whose bounds or multipleOf leave no such number gets more digits, as
//     few as it needs (grammar/number.go). A number never takes a digit
//     that leaves it no way to end (a fraction of zeros under
//     exclusiveMinimum 0). Param
//     max_string_length (response_format.max_string_length) caps, in code
//     points, the strings and additional property names the schema leaves
//     unbounded (strings with no maxLength, pattern or format; names in
//     objects without patternProperties or propertyNames pattern; a
//     minLength above the cap wins; named properties are never cut); 0,
//     the default, leaves them uncapped, because a default cap would
//     silently refuse valid documents and max_tokens already bounds a
//     runaway string. With a trigger (param trigger,
//     response_format.trigger) the schema binds only output that starts
//     with it: free text that does not start with the trigger, or the
//     trigger and a valid document (trigger.go); the gateways' tool calls
//     with tool_choice auto.
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
//     Everything the job emits goes through it, the suffix included.
//   - retry_on_fail {output_contains, max_retries}: the engine regenerates
//     when the output contains a marker. Every attempt is counted in usage
//     and billed; a retry bans, while it follows the failed attempt token
//     for token, the token with which that attempt began the marker
//     (RetryMarker), so even at temperature 0 it is not a repeat.
//   - suffix {text}: appended after generation; always last, and seen by
//     the redactors (pii_redactor, toxicity_filter in redact mode) like
//     the rest of the output.
//
// A declaration is checked against contracts' tool table: a parameter the
// tool does not have is refused at its path (tools[1].params.foo), as is a
// value out of range (a toxicity mode at params.mode).
//
// # JSON Schema keywords
//
// Exact in the mask: type, properties, required, additionalProperties,
// patternProperties, propertyNames (string constraints),
// min/maxProperties, dependentRequired and array-form dependencies, enum,
// const, items, prefixItems (and draft 4-2019 tuple items /
// additionalItems), min/maxItems, contains: true/false, min/maxLength
// (counters, not unrolled states: maxLength 100000 costs what an
// unbounded string costs), pattern, format (date, date-time, time, email,
// hostname, ipv4, ipv6, uuid, uri, iri, uri-reference, iri-reference,
// json-pointer, duration), minimum/maximum/exclusive*, multipleOf, anyOf,
// allOf (merged), local $ref (JSON pointers, $id, $anchor). Any keyword
// next to enum/const is handled exactly (the literals are filtered by the
// validator). And:
//
//   - uniqueItems: an item equal to an earlier string, number, boolean or
//     null item cannot end (strings compared decoded, numbers by value:
//     1, 1.0 and 1e0 are one value); object and array items are compared
//     by the final validation. The mask looks one item at a time: a string
//     item whose pattern (or an enum of more than 64 values) leaves only
//     values the array already holds is a dead end, and the job fails
//     with TOOL_CONSTRAINT_UNSATISFIABLE rather than emit a duplicate.
//   - not, when its schema is built of type, enum, const, required,
//     properties, the bounds (minimum, maximum, exclusive*,
//     min/maxLength, min/maxItems, min/maxProperties), allOf, anyOf, not
//     and $ref: it is negated into alternatives (not enum on strings is a
//     pattern of every other string; on numbers, the intervals between
//     them). Two parts are left to the final validation: not integer (the
//     grammar admits every number) and object or array values a not enum
//     names. Other not forms are unsupported.
//   - if/then/else, when its if negates as above: the value is (if and
//     then) or (not if and else), and the decoder follows both
//     alternatives until the properties the if examines settle it. No key
//     order is imposed: the if's properties may come before or after the
//     others, and the alternative the output contradicts dies as soon as
//     it does. An if that does not negate is checked by the final
//     validation.
//   - dependentSchemas (and schema-valued dependencies before 2019-09):
//     (the key absent) or (the key present and its schema), followed the
//     same way; false forbids the key.
//   - oneOf whose branches no value the rest of the schema allows can
//     satisfy two at a time (told apart by type, const/enum
//     discriminators, required keys another branch forbids, disjoint
//     bounds): an anyOf. Overlapping branches that negate as above become
//     the alternatives (one branch and not the others), at most 64 of
//     them. Otherwise the oneOf compiles as anyOf and its exclusivity is
//     checked by the final validation.
//
// What only the final validation checks is named in the tool's report
// ("partly checked after generation: <keyword> at <pointer> ..."). An
// output that fails it is generated again, up to MaxRechecks (2) times
// (a "retried" tool event says why; the attempts are counted and billed,
// and each retry avoids the failed attempt's first token); if the last
// fails too, the job fails (tool_execution_failed, TOOL_VALIDATION_FAILED). Other validation keywords ($dynamicRef,
// maxContains, other not forms, ...) are a compile error naming the
// keyword and its JSON pointer; in soft mode the keyword is left out, the
// final validation checks it and the report says "constraint: soft". A
// schema no value satisfies (false, enum: [], not {}, a required property
// whose schema is false, a number whose bounds need more than 38 digits)
// is refused with invalid_schema, naming the pointer.
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
// the end Finish validates, appends the suffix, flushes held-back text and
// the suffix through the text tools, and returns the tail (the suffix
// last). When generation stopped at a budget (max_tokens, the context, a
// memory cap) the engine calls Truncate first: a constraint that could not
// end there is incomplete, not failed, and Finish does not validate it.
// Retry, RetryMarker and Reset implement retry_on_fail; Report, TimeMs and
// Events feed the final event, usage and tool events.
//
// A Run is not safe for concurrent use, but its calls may come from any
// goroutine, so the engine can compute the next mask while the forward
// pass runs. Masks are computed by walking a byte trie of the vocabulary
// (built once per vocabulary) against the automaton state; the masks of
// lexical states (inside a string or key, an XML text run, a regex state)
// are cached, so a mask in the middle of a string is a copy and a few
// hundred short checks: the tokens that leave the string are checked
// against the enclosing state once per distinct suffix shape (the trie's
// subtrees are hash-consed), not once per token. BenchmarkMaskVocab
// (bench: vocabbench_test.go) measures masks over jsonschemabench at 32k,
// 50k (GPT-2) and 256k tokens.
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
