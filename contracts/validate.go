package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Limits bounds what a job request may ask for. The zero value is usable:
// every zero field takes its default. Long-lived components keep one Limits
// built from their configuration and pass it to DecodeJobRequest and
// Validate.
type Limits struct {
	// MaxRequestBytes caps the encoded request. Keep it below the NATS
	// server's max_payload (1 MiB by default) minus room for headers.
	// Defaults to 1,000,000 bytes.
	MaxRequestBytes int
	// MaxMessages caps len(messages). Defaults to 1,000.
	MaxMessages int
	// MaxTokensCeiling caps max_tokens. Defaults to 32,768.
	MaxTokensCeiling int
	// DefaultMaxTokens is the max_tokens of a request that sets none; it
	// is lowered to MaxTokensCeiling when above it. Defaults to 1,024.
	DefaultMaxTokens int
	// MaxStopSequences caps len(stop_sequences). Defaults to 16.
	MaxStopSequences int
	// MaxTopLogprobs caps top_logprobs. Defaults to 20.
	MaxTopLogprobs int
	// MaxTools caps len(tools). Defaults to 16.
	MaxTools int
	// MaxMetadataKeys caps len(metadata). Defaults to 16.
	MaxMetadataKeys int
	// MaxMemoryMB caps memory.max_memory_mb; 0 means no cap. Defaults to 0.
	MaxMemoryMB int
	// AllowUnknownFields makes DecodeJobRequest ignore fields it does not
	// know instead of rejecting them. Gateways should leave it false, so
	// that a misspelt parameter is an error rather than silently ignored;
	// a worker that must accept requests from newer producers during a
	// rolling upgrade may set it. Defaults to false.
	AllowUnknownFields bool
	// KnownModel reports whether a model name is served. Nil accepts any
	// well-formed name (the worker then answers unknown_model itself).
	// Defaults to nil.
	KnownModel func(model string) bool
}

// Fixed bounds that Limits does not configure.
const (
	// MaxModelNameLen is the longest model name.
	MaxModelNameLen = 256
	// MaxStopSequenceLen is the longest stop sequence, in bytes.
	MaxStopSequenceLen = 256
	// MaxMetadataKeyLen is the longest metadata key, in bytes.
	MaxMetadataKeyLen = 64
	// MaxMetadataValueLen is the longest metadata value, in bytes.
	MaxMetadataValueLen = 512
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&l.MaxRequestBytes, 1_000_000)
	set(&l.MaxMessages, 1000)
	set(&l.MaxTokensCeiling, 32768)
	set(&l.DefaultMaxTokens, 1024)
	l.DefaultMaxTokens = min(l.DefaultMaxTokens, l.MaxTokensCeiling)
	set(&l.MaxStopSequences, 16)
	set(&l.MaxTopLogprobs, 20)
	set(&l.MaxTools, 16)
	set(&l.MaxMetadataKeys, 16)
	return l
}

// problems collects the problems of one request, in the order found.
type problems []*Error

func (ps *problems) add(code Code, field, format string, args ...any) *Error {
	e := fieldError(code, field, format, args...)
	*ps = append(*ps, e)
	return e
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Validate checks every rule of the contract that needs no model, tokenizer
// or clock (prompt_too_long and deadline_exceeded are the worker's), and
// returns nil or a *ValidationError listing every problem with its JSON
// field path, such as messages[2].role, max_tokens, tools[0].name or
// response_format.schema. Zero fields of lim take their defaults.
func (r *JobRequest) Validate(lim Limits) error {
	lim = lim.WithDefaults()
	var ps problems

	if r.ID != "" {
		if msg := tokenProblem(r.ID, MaxJobIDLen); msg != "" {
			ps.add(CodeInvalidRequest, "id", "job id %s", msg)
		}
	}

	switch {
	case r.Model == "":
		ps.add(CodeInvalidRequest, "model", "model is required")
	case len(r.Model) > MaxModelNameLen || strings.ContainsFunc(r.Model, isSpaceOrControl):
		ps.add(CodeInvalidRequest, "model", "model name must be 1-%d characters without whitespace or control characters", MaxModelNameLen)
	case lim.KnownModel != nil && !lim.KnownModel(r.Model):
		ps.add(CodeUnknownModel, "model", "model %q is not served here", r.Model)
	}

	if r.IsEmbedding() {
		r.validateEmbedding(lim, &ps)
	}
	switch n := len(r.Messages); {
	case n == 0 && r.IsEmbedding():
	case n == 0:
		ps.add(CodeMissingMessages, "messages", "at least one message is required")
	case n > lim.MaxMessages:
		ps.add(CodeInvalidRequest, "messages", "%d messages is above the limit of %d", n, lim.MaxMessages)
	}
	for i, m := range r.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleUser, RoleAssistant:
		case "system":
			ps.add(CodeInvalidRequest, field+".role", "role system is not a message role; put the system prompt in the top-level system field")
		default:
			ps.add(CodeInvalidRequest, field+".role", "role %q is not user or assistant", m.Role)
		}
		// A final assistant message may be empty: it is a prefill.
		if m.Content == "" && !(m.Role == RoleAssistant && i == len(r.Messages)-1) {
			ps.add(CodeInvalidRequest, field+".content", "content is empty")
		}
	}

	if r.MaxTokens < 0 || r.MaxTokens > lim.MaxTokensCeiling {
		ps.add(CodeMaxTokensOutOfRange, "max_tokens", "max_tokens %d is outside [1, %d]; leave it out for the default of %d", r.MaxTokens, lim.MaxTokensCeiling, lim.DefaultMaxTokens)
	}

	r.validateSampling(lim, &ps)

	if r.Thinking != nil && r.Thinking.Type != ThinkingEnabled && r.Thinking.Type != ThinkingDisabled {
		ps.add(CodeInvalidRequest, "thinking.type", "thinking type %q is neither enabled nor disabled", r.Thinking.Type)
	}
	if r.Preset != "" && !r.Preset.Valid() {
		ps.add(CodeUnknownPreset, "preset", "preset %q is not one of concise, balanced, detailed, creative", r.Preset)
	}
	if !r.Speculation.Valid() {
		ps.add(CodeInvalidRequest, "speculation", "speculation %q is not one of auto, off", r.Speculation)
	}
	if r.Priority != "" && !r.Priority.Valid() {
		ps.add(CodeInvalidRequest, "priority", "priority %q is not one of high, normal, low", r.Priority)
	}
	if r.Deadline != nil && r.Deadline.IsZero() {
		ps.add(CodeInvalidRequest, "deadline", "deadline is the zero time; leave it out for no deadline")
	}

	if rf := r.ResponseFormat; rf != nil {
		switch rf.Type {
		case FormatJSONSchema:
			if len(rf.Schema) == 0 {
				ps.add(CodeInvalidSchema, "response_format.schema", "type json_schema needs a schema")
			} else if msg := SchemaProblem(rf.Schema); msg != "" {
				ps.add(CodeInvalidSchema, "response_format.schema", "%s", msg)
			}
			if rf.Pattern != "" {
				ps.add(CodeInvalidRequest, "response_format.pattern", "type json_schema takes no pattern")
			}
			if len(rf.Trigger) > MaxTriggerBytes {
				ps.add(CodeInvalidRequest, "response_format.trigger", "trigger is %d bytes, above the limit of %d", len(rf.Trigger), MaxTriggerBytes)
			}
			if !rf.Whitespace.Valid() {
				ps.add(CodeInvalidRequest, "response_format.whitespace", "whitespace %q is not compact or pretty; leave it out for compact", rf.Whitespace)
			}
			if rf.MaxStringLength < 0 || rf.MaxStringLength > MaxStringLengthLimit {
				ps.add(CodeInvalidRequest, "response_format.max_string_length", "max_string_length %d is outside [0, %d]; leave it out for no cap", rf.MaxStringLength, MaxStringLengthLimit)
			}
		case FormatRegex:
			if rf.Pattern == "" {
				ps.add(CodeInvalidRegex, "response_format.pattern", "type regex needs a pattern")
			} else if msg := regexProblem(rf.Pattern); msg != "" {
				ps.add(CodeInvalidRegex, "response_format.pattern", "%s", msg)
			}
			if len(rf.Schema) != 0 {
				ps.add(CodeInvalidRequest, "response_format.schema", "type regex takes no schema")
			}
			if rf.Trigger != "" {
				ps.add(CodeInvalidRequest, "response_format.trigger", "type regex takes no trigger")
			}
			if rf.Whitespace != "" || rf.MaxStringLength != 0 {
				ps.add(CodeInvalidRequest, "response_format", "type regex takes no whitespace or max_string_length")
			}
		default:
			ps.add(CodeInvalidRequest, "response_format.type", "type %q is not json_schema or regex", rf.Type)
		}
	}

	if n := len(r.Tools); n > lim.MaxTools {
		ps.add(CodeInvalidRequest, "tools", "%d tools is above the limit of %d", n, lim.MaxTools)
	}
	seen := make(map[ToolName]int, len(r.Tools))
	for i := range r.Tools {
		validateTool(&r.Tools[i], fmt.Sprintf("tools[%d]", i), seen, i, &ps)
	}
	// The tools declared in the system prompt are checked as tools[] are,
	// at system.tools[k], so that a bad one is refused at submit rather
	// than by the worker. (A malformed block is the producer's refusal;
	// one tool declared both ways is the worker's to merge.)
	if strings.Contains(r.System, "<tool") {
		if sp, err := ParseSystemPrompt(r.System); err == nil {
			for k := range sp.Tools {
				validateTool(&sp.Tools[k], fmt.Sprintf("system.tools[%d]", k), map[ToolName]int{}, k, &ps)
			}
		}
	}
	switch r.OnToolFailure {
	case "", OnToolFailureFail, OnToolFailureRetryWithoutTool:
	case OnToolFailureFallback:
		if r.FallbackResponse == "" {
			ps.add(CodeInvalidRequest, "fallback_response", "on_tool_failure fallback needs a fallback_response: the answer given when a tool fails")
		}
	default:
		ps.add(CodeInvalidRequest, "on_tool_failure", "on_tool_failure %q is not fail, retry_without_tool or fallback", r.OnToolFailure)
	}
	if r.FallbackResponse != "" {
		switch {
		case r.OnToolFailure == "" || r.OnToolFailure == OnToolFailureFail:
			ps.add(CodeInvalidRequest, "fallback_response", "fallback_response is used only with on_tool_failure fallback or retry_without_tool; set one of them or leave fallback_response out")
		case len(r.FallbackResponse) > MaxFallbackResponseBytes:
			ps.add(CodeInvalidRequest, "fallback_response", "fallback_response is %d bytes, above the limit of %d", len(r.FallbackResponse), MaxFallbackResponseBytes)
		case !utf8.ValidString(r.FallbackResponse):
			ps.add(CodeInvalidRequest, "fallback_response", "fallback_response is not valid UTF-8")
		}
	}
	if m := r.Memory; m != nil && m.Preemptible != nil && *m.Preemptible && !m.LowLatency && strings.Contains(r.System, DirectiveLowLatencyMode) {
		if sp, err := ParseSystemPrompt(r.System); err == nil && sp.LowLatency {
			ps.add(CodeInvalidRequest, "memory.preemptible", "the system prompt's low_latency_mode asks never to preempt the job; leave preemptible out or set it false")
		}
	}

	if m := r.Memory; m != nil {
		switch {
		case m.MaxMemoryMB < 0:
			ps.add(CodeInvalidRequest, "memory.max_memory_mb", "max_memory_mb %d is negative; leave it out for no cap", m.MaxMemoryMB)
		case lim.MaxMemoryMB > 0 && m.MaxMemoryMB > lim.MaxMemoryMB:
			ps.add(CodeMemoryLimit, "memory.max_memory_mb", "max_memory_mb %d is above the limit of %d", m.MaxMemoryMB, lim.MaxMemoryMB)
		}
		if m.LowLatency && m.Preemptible != nil && *m.Preemptible {
			ps.add(CodeInvalidRequest, "memory.preemptible", "a low_latency job is never preempted; leave preemptible out or set it false")
		}
	}

	if n := len(r.Metadata); n > lim.MaxMetadataKeys {
		ps.add(CodeInvalidRequest, "metadata", "%d metadata keys is above the limit of %d", n, lim.MaxMetadataKeys)
	}
	for _, k := range sortedKeys(r.Metadata) {
		switch {
		case k == "" || len(k) > MaxMetadataKeyLen:
			ps.add(CodeInvalidRequest, "metadata", "metadata key %q must be 1-%d bytes", k, MaxMetadataKeyLen)
		case len(r.Metadata[k]) > MaxMetadataValueLen:
			ps.add(CodeInvalidRequest, "metadata."+k, "metadata value is %d bytes, above the limit of %d", len(r.Metadata[k]), MaxMetadataValueLen)
		}
	}
	return ps.err()
}

// validateSampling checks the sampling fields; the ranges match the
// worker's sampler.
func (r *JobRequest) validateSampling(lim Limits, ps *problems) {
	if t := r.Temperature; t != nil && !(*t >= 0 && *t <= 2) {
		ps.add(CodeInvalidSampling, "temperature", "temperature %v is outside [0, 2]; use 0 for greedy decoding", *t)
	}
	if p := r.TopP; p != nil && !(*p > 0 && *p <= 1) {
		ps.add(CodeInvalidSampling, "top_p", "top_p %v is outside (0, 1]; use 1 to disable it", *p)
	}
	if k := r.TopK; k != nil && *k < 0 {
		ps.add(CodeInvalidSampling, "top_k", "top_k %d is negative; use 0 to disable it", *k)
	}
	if p := r.MinP; p != nil && !(*p >= 0 && *p < 1) {
		ps.add(CodeInvalidSampling, "min_p", "min_p %v is outside [0, 1); use 0 to disable it", *p)
	}
	if p := r.RepetitionPenalty; p != nil && !(*p > 0 && *p <= math.MaxFloat32) {
		ps.add(CodeInvalidSampling, "repetition_penalty", "repetition_penalty %v must be a positive number; use 1 to disable it", *p)
	}
	switch {
	case r.TopLogprobs < 0 || r.TopLogprobs > lim.MaxTopLogprobs:
		ps.add(CodeInvalidSampling, "top_logprobs", "top_logprobs %d is outside [0, %d]", r.TopLogprobs, lim.MaxTopLogprobs)
	case r.TopLogprobs > 0 && !r.Logprobs:
		ps.add(CodeInvalidSampling, "top_logprobs", "top_logprobs needs logprobs: true")
	}
	if n := len(r.StopSequences); n > lim.MaxStopSequences {
		ps.add(CodeInvalidSampling, "stop_sequences", "%d stop sequences is above the limit of %d", n, lim.MaxStopSequences)
	}
	for i, s := range r.StopSequences {
		if s == "" || len(s) > MaxStopSequenceLen {
			ps.add(CodeInvalidSampling, fmt.Sprintf("stop_sequences[%d]", i), "a stop sequence must be 1-%d bytes", MaxStopSequenceLen)
		}
	}
}

// validateTool checks one inline tool against the tool table.
func validateTool(t *Tool, field string, seen map[ToolName]int, i int, ps *problems) {
	params, ok := toolParams(t.Name)
	if !ok {
		e := ps.add(CodeUnknownTool, field+".name", "tool %q is not one of %s", t.Name, joinToolNames())
		e.Tool = string(t.Name)
		return
	}
	toolErr := func(code Code, f, format string, args ...any) {
		e := ps.add(code, f, format, args...)
		e.Tool = string(t.Name)
	}
	if j, dup := seen[t.Name]; dup {
		toolErr(CodeInvalidRequest, field+".name", "tool %s is already declared at tools[%d]", t.Name, j)
	} else {
		seen[t.Name] = i
	}
	switch t.Mode {
	case "", ToolModeStrict, ToolModeSoft:
	default:
		toolErr(CodeInvalidRequest, field+".mode", "mode %q is not strict or soft", t.Mode)
	}
	if msg := contextIDProblem(t.ContextID); msg != "" {
		toolErr(CodeInvalidRequest, field+".context_id", "%s", msg)
	}
	known := make(map[string]bool, len(params))
	for _, p := range params {
		known[p.name] = true
		f := field + ".params." + p.name
		raw, present := t.Params[p.name]
		if !present || isJSONNull(raw) {
			if p.required {
				toolErr(CodeInvalidRequest, f, "tool %s needs param %s", t.Name, p.name)
			}
			continue
		}
		checkParam(p, raw, f, toolErr)
	}
	for _, k := range sortedKeys(t.Params) {
		if !known[k] {
			toolErr(CodeInvalidRequest, field+".params."+k, "tool %s has no param %s", t.Name, k)
		}
	}
}

// contextIDProblem returns why id is not a valid Tool.ContextID, or "".
// Empty is valid (the default pool).
func contextIDProblem(id string) string {
	if id == "" {
		return ""
	}
	if len(id) > MaxContextIDLen {
		return fmt.Sprintf("context_id is %d bytes, above the limit of %d", len(id), MaxContextIDLen)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Sprintf("context_id %q may hold only A-Z, a-z, 0-9, _, . and -", id)
		}
	}
	return ""
}

// checkParam checks one present tool parameter's JSON against its kind.
func checkParam(p toolParam, raw json.RawMessage, f string, toolErr func(Code, string, string, ...any)) {
	switch p.kind {
	case paramString:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			toolErr(CodeInvalidRequest, f, "must be a string")
		} else if p.check != nil {
			if _, ok := p.check(s); !ok {
				toolErr(CodeInvalidRequest, f, "%s %q is not one of %s", p.name, s, strings.Join(p.values(), ", "))
			}
		}
	case paramStrings, paramRegexes:
		var ss []string
		if json.Unmarshal(raw, &ss) != nil {
			toolErr(CodeInvalidRequest, f, "must be an array of strings")
			return
		}
		for j, s := range ss {
			if s == "" {
				toolErr(CodeInvalidRequest, fmt.Sprintf("%s[%d]", f, j), "must not be empty")
			} else if p.kind == paramRegexes {
				if msg := regexProblem(s); msg != "" {
					toolErr(CodeInvalidRegex, fmt.Sprintf("%s[%d]", f, j), "%s", msg)
				}
			}
		}
	case paramInt:
		var n int
		if json.Unmarshal(raw, &n) != nil || n < 0 || n > p.max {
			toolErr(CodeInvalidRequest, f, "must be an integer in [0, %d]", p.max)
		}
	case paramRegex:
		var s string
		switch {
		case json.Unmarshal(raw, &s) != nil:
			toolErr(CodeInvalidRegex, f, "must be a string")
		case s == "":
			toolErr(CodeInvalidRegex, f, "must not be empty")
		default:
			if msg := regexProblem(s); msg != "" {
				toolErr(CodeInvalidRegex, f, "%s", msg)
			}
		}
	case paramSchema:
		if msg := SchemaProblem(raw); msg != "" {
			toolErr(CodeInvalidSchema, f, "%s", msg)
		}
	}
}

func joinToolNames() string {
	names := ToolNames()
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// regexProblem returns why pattern is not valid RE2 syntax, or "".
func regexProblem(pattern string) string {
	if _, err := regexp.Compile(pattern); err != nil {
		return "pattern does not compile: " + err.Error()
	}
	return ""
}

// schemaURL names the schema under compilation; no loader can fetch it.
const schemaURL = "urn:zerolayer:request-schema"

// noLoader refuses every external reference: a request's schema must be
// self-contained, and compiling it must never read files or the network.
type noLoader struct{}

// Load refuses url.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; inline it under $defs", url)
}

// SchemaProblem returns why raw is not a compilable JSON Schema (draft
// 2020-12 unless it says otherwise; self-contained: no external $ref),
// naming the keyword and where, or "". Keyword support of the worker's
// constrained decoding is checked by the worker, not here.
func SchemaProblem(raw json.RawMessage) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "schema is not valid JSON: " + err.Error()
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return "schema must be a JSON object or a boolean"
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return "schema cannot be added: " + err.Error()
	}
	if _, err := c.Compile(schemaURL); err != nil {
		return "schema does not compile: " + schemaErrorText(err)
	}
	return ""
}

// maxSchemaFaults caps the faults one schema problem lists.
const maxSchemaFaults = 3

var schemaPrinter = message.NewPrinter(language.English)

// schemaErrorText says where a schema breaks the metaschema, one fault per
// place ("at /properties/total/minimum: got string, want number"), on one
// line. Other compile errors keep their own text.
func schemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), schemaURL, "schema")), " ")
	}
	var faults []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			faults = append(faults, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(schemaPrinter)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	n := len(faults)
	if n > maxSchemaFaults {
		faults = append(faults[:maxSchemaFaults], fmt.Sprintf("and %d more", n-maxSchemaFaults))
	}
	return strings.Join(strings.Fields(strings.Join(faults, "; ")), " ")
}

func isSpaceOrControl(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
}

func isJSONNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// asValidationError wraps a single *Error as a *ValidationError, so that
// DecodeJobRequest always returns the same type.
func asValidationError(err error) *ValidationError {
	var v *ValidationError
	if errors.As(err, &v) {
		return v
	}
	return &ValidationError{Problems: []*Error{ErrorFrom(err)}}
}
