package contracts

import (
	"slices"
	"strings"
)

// ToolName names an inline tool.
type ToolName string

// The inline tools. Each runs inside the decode loop under the job's budget;
// see the worker's tools package for what each does.
const (
	// ToolJSONValidator constrains the output to a JSON Schema.
	// Params: schema (required), trigger (the schema then binds only
	// output that starts with it; see ResponseFormat.Trigger), whitespace
	// (compact, the default, or pretty; see ResponseFormat.Whitespace),
	// max_string_length (see ResponseFormat.MaxStringLength).
	ToolJSONValidator ToolName = "json_validator"
	// ToolRegexMatcher constrains the output to an RE2 pattern.
	// Params: pattern (required).
	ToolRegexMatcher ToolName = "regex_matcher"
	// ToolXMLValidator allows only the listed tags, balanced.
	// Params: allowed_tags (required).
	ToolXMLValidator ToolName = "xml_validator"
	// ToolPIIRedactor redacts personal data from the stream.
	// Params: patterns, entities.
	ToolPIIRedactor ToolName = "pii_redactor"
	// ToolToxicityFilter masks banned words at the logits.
	// Params: words (required), mode (ToxicityModes; default block).
	ToolToxicityFilter ToolName = "toxicity_filter"
	// ToolRetryOnFail regenerates when the output contains a marker.
	// Params: output_contains (required), max_retries (default 1).
	// Every attempt's tokens and time are counted in the job's usage and
	// billed (Usage.RetriedOutputTokens, Result.Attempts). A retry is
	// never a repeat of the failed attempt, even at temperature 0: while
	// it follows a failed attempt token for token, the token with which
	// that attempt began the marker (its first token when the marker
	// cannot be placed) is banned at that position, so the retry keeps
	// the failed attempt's good prefix and diverges where the marker
	// began. A ban that would leave no token allowed is not applied.
	// The sampler's random state is not reset between attempts.
	ToolRetryOnFail ToolName = "retry_on_fail"
	// ToolSuffix appends a mandatory suffix after generation.
	// Params: text (required).
	ToolSuffix ToolName = "suffix"
)

// MaxToolRetries bounds retry_on_fail's max_retries.
const MaxToolRetries = 16

// ToxicityModes are the values of toxicity_filter's mode parameter:
// "block" (the default) masks the words anywhere, "word" only as whole
// words, "redact" replaces them in the text stream. ToxicityMode also takes
// their aliases.
func ToxicityModes() []string { return []string{"block", "word", "redact"} }

// ToxicityMode returns the toxicity_filter mode that s names, without
// regard to case ("" is block; "mask" and "substring" are aliases of
// block, "words" and "whole_word" of word), and whether s names one.
func ToxicityMode(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "", "block", "mask", "substring":
		return "block", true
	case "word", "words", "whole_word":
		return "word", true
	case "redact":
		return "redact", true
	}
	return "", false
}

// paramKind is the JSON shape a tool parameter must have.
type paramKind int

const (
	paramString  paramKind = iota // a string
	paramStrings                  // an array of strings
	paramInt                      // an integer in [0, max]
	paramSchema                   // a JSON Schema (object or boolean) that compiles
	paramRegex                    // an RE2 pattern that compiles
	paramRegexes                  // an array of RE2 patterns
)

// toolParam describes one parameter of a tool.
type toolParam struct {
	name     string
	kind     paramKind
	required bool
	max      int                         // for paramInt
	check    func(string) (string, bool) // for paramString: a value's check, or nil for any
	values   func() []string             // with check: the values, for messages
}

// toolSpecs is the table of inline tools and their parameters. The order of
// the tools is the order ToolNames returns.
var toolSpecs = []struct {
	name   ToolName
	params []toolParam
}{
	{ToolJSONValidator, []toolParam{{name: "schema", kind: paramSchema, required: true}, {name: "trigger", kind: paramString},
		{name: "whitespace", kind: paramString, check: whitespaceLayout, values: whitespaceLayouts},
		{name: "max_string_length", kind: paramInt, max: MaxStringLengthLimit}}},
	{ToolRegexMatcher, []toolParam{{name: "pattern", kind: paramRegex, required: true}}},
	{ToolXMLValidator, []toolParam{{name: "allowed_tags", kind: paramStrings, required: true}}},
	{ToolPIIRedactor, []toolParam{{name: "patterns", kind: paramRegexes}, {name: "entities", kind: paramStrings}}},
	{ToolToxicityFilter, []toolParam{{name: "words", kind: paramStrings, required: true}, {name: "mode", kind: paramString, check: ToxicityMode, values: ToxicityModes}}},
	{ToolRetryOnFail, []toolParam{{name: "output_contains", kind: paramStrings, required: true}, {name: "max_retries", kind: paramInt, max: MaxToolRetries}}},
	{ToolSuffix, []toolParam{{name: "text", kind: paramString, required: true}}},
}

// ToolNames returns the name of every inline tool.
func ToolNames() []ToolName {
	out := make([]ToolName, len(toolSpecs))
	for i, s := range toolSpecs {
		out[i] = s.name
	}
	return out
}

// Valid reports whether n names an inline tool.
func (n ToolName) Valid() bool {
	_, ok := toolParams(n)
	return ok
}

// ParamNames returns the names of tool n's parameters (nil when n is not a
// tool). A declaration with any other parameter is refused, at submit
// (JobRequest.Validate) and by the worker.
func (n ToolName) ParamNames() []string {
	params, _ := toolParams(n)
	var out []string
	for _, p := range params {
		out = append(out, p.name)
	}
	return out
}

// toolParams returns the parameter table of tool n, and whether n is a
// tool.
func toolParams(n ToolName) ([]toolParam, bool) {
	for _, s := range toolSpecs {
		if s.name == n {
			return s.params, true
		}
	}
	return nil, false
}

// whitespaceLayouts lists the json_validator whitespace values.
func whitespaceLayouts() []string {
	return []string{string(WhitespaceCompact), string(WhitespacePretty)}
}

// whitespaceLayout checks a json_validator whitespace value.
func whitespaceLayout(s string) (string, bool) { return s, slices.Contains(whitespaceLayouts(), s) }
