package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/schema"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// Vocab is what tools need of a tokenizer: the raw bytes of every token and
// which tokens end generation. *tokenizer.Tokenizer satisfies it.
//
// When the value also has a TokenType(int32) tokenizer.TokenType method,
// control, unknown and unused tokens are kept out of constrained output (they
// render no text, so a constraint could not account for them).
type Vocab interface {
	VocabSize() int
	Piece(id int32) []byte
	IsEOG(id int32) bool
}

// Prepare builds the index of v (the byte trie of its tokens and the token
// classes every mask uses) ahead of the first Compile for it, which would
// otherwise pay for it: tens of milliseconds for a 32k vocabulary. The index
// is kept for comparable Vocab values (a *tokenizer.Tokenizer).
func Prepare(v Vocab) { vocab.IndexOf(v) }

// Set is a job's compiled tools for one vocabulary. It is immutable and
// safe to share; each generation takes its own state with NewRun.
type Set struct {
	tools       []*compiledTool
	vi          *vocab.Index
	budget      Budget
	compileTime time.Duration
	cacheHits   int
	masks       bool // some tool masks tokens
	texts       bool // some tool filters the text stream
}

// compiledTool is one tool, compiled; shared through the compile cache.
type compiledTool struct {
	name  contracts.ToolName
	field string // where it was declared: tools[2], response_format, system
	soft  bool
	notes []string // what the mask leaves to the final validation (soft mode: and what is unsupported)

	json   *jsonTool
	regex  *regexTool
	xml    *xmlMachine
	pii    *piiSpec
	tox    *toxSpec
	retry  *retrySpec
	suffix string

	// context is the tool's context_id, the memory pool it runs in:
	// tools of different pools are compiled (and cached) apart.
	context string
}

type jsonTool struct {
	m   *grammar.Machine
	val *schema.Validator
	// trig is set with a trigger: the schema binds only output that
	// starts with it (see trigger.go).
	trig *triggerMasks
}

type regexTool struct {
	m  *regexMachine
	re *regexp.Regexp // the second check (leftmost-longest)
}

// memBytes is the memory the compiled tool holds now: automata, states
// and mask caches, which grow as jobs use it (and are shared by the jobs
// that use the same compiled tool).
func (t *compiledTool) memBytes() int64 {
	var m *limit.Meter
	switch {
	case t.json != nil:
		m = t.json.m.Meter
	case t.regex != nil:
		m = t.regex.m.mem
	case t.xml != nil:
		m = t.xml.mem
	case t.pii != nil:
		m = t.pii.mem
	case t.tox != nil:
		m = t.tox.mem
	}
	if m == nil {
		return 0
	}
	return m.Used.Load()
}

// masks reports whether the tool constrains tokens.
func (t *compiledTool) masks() bool { return t.json != nil || t.regex != nil || t.xml != nil }

// Tools returns the names of the set's tools, in order.
func (s *Set) Tools() []contracts.ToolName {
	out := make([]contracts.ToolName, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.name
	}
	return out
}

// Constrained reports whether some tool masks tokens (Mask can return
// true).
func (s *Set) Constrained() bool { return s.masks }

// CompileTime returns how long Compile took for this set (cache hits are
// nearly free).
func (s *Set) CompileTime() time.Duration { return s.compileTime }

// CacheHits returns how many of the set's tools came from the compile
// cache.
func (s *Set) CacheHits() int { return s.cacheHits }

// Metrics counts compile-cache activity since the process started.
type Metrics struct {
	// CacheHits and CacheMisses count tools found in, and compiled for,
	// the compile cache.
	CacheHits, CacheMisses int64
	// CompileNanos is the total time spent compiling (misses only).
	CompileNanos int64
	// CachedTools is the number of compiled tools the cache holds now.
	CachedTools int
}

var metrics struct {
	hits, misses, nanos atomic.Int64
}

// ReadMetrics returns the compile-cache counters.
func ReadMetrics() Metrics {
	toolCache.mu.Lock()
	n := len(toolCache.m)
	toolCache.mu.Unlock()
	return Metrics{
		CacheHits:    metrics.hits.Load(),
		CacheMisses:  metrics.misses.Load(),
		CompileNanos: metrics.nanos.Load(),
		CachedTools:  n,
	}
}

// toolCache holds compiled tools by (tool, params hash, vocabulary,
// budget), least recently used out first.
var toolCache struct {
	mu    sync.Mutex
	m     map[toolKey]*cacheEntry
	clock uint64
}

type toolKey struct {
	hash   string
	vi     *vocab.Index
	budget Budget
	// context is the tool's context_id: tools of different pools never
	// share a compiled copy (its automata, mask caches and memory meter).
	context string
}

type cacheEntry struct {
	t    *compiledTool
	used uint64
}

// maxCachedTools bounds the compile cache.
const maxCachedTools = 512

func cacheGet(k toolKey) *compiledTool {
	toolCache.mu.Lock()
	defer toolCache.mu.Unlock()
	e, ok := toolCache.m[k]
	if !ok {
		return nil
	}
	toolCache.clock++
	e.used = toolCache.clock
	return e.t
}

func cachePut(k toolKey, t *compiledTool) {
	toolCache.mu.Lock()
	defer toolCache.mu.Unlock()
	if toolCache.m == nil {
		toolCache.m = map[toolKey]*cacheEntry{}
	}
	if len(toolCache.m) >= maxCachedTools {
		var oldest toolKey
		var at uint64 = ^uint64(0)
		for k, e := range toolCache.m {
			if e.used < at {
				oldest, at = k, e.used
			}
		}
		delete(toolCache.m, oldest)
	}
	toolCache.clock++
	toolCache.m[k] = &cacheEntry{t: t, used: toolCache.clock}
}

// specHash hashes a tool's name, mode and parameters.
func specHash(spec contracts.Tool) string {
	h := sha256.New()
	h.Write([]byte(spec.Name))
	h.Write([]byte{0})
	h.Write([]byte(spec.Mode))
	keys := make([]string, 0, len(spec.Params))
	for k := range spec.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(spec.Params[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Compile parses and compiles a job's tools for a vocabulary: specs (the
// request's tools[] and the blocks contracts.ParseSystem extracted), then rf
// (response_format, the same as a json_validator or regex_matcher tool, in
// the default pool). Compiled tools are cached by (tool and parameters
// hash, vocabulary, budget, context_id), so the same schema compiles once
// per tokenizer and pool.
//
// Errors are *contracts.Error: unknown_tool, invalid_request (a missing or
// malformed parameter), invalid_schema (naming the unsupported keyword and
// where), invalid_regex, or tool_execution_failed with ToolTimeout or
// ToolMemoryExhausted when compiling goes over the budget; Tool and
// ToolCode are set.
func Compile(specs []contracts.Tool, rf *contracts.ResponseFormat, v Vocab, b Budget) (*Set, error) {
	start := time.Now()
	b = b.WithDefaults()
	vi := vocab.IndexOf(v)
	s := &Set{vi: vi, budget: b}
	type decl struct {
		spec  contracts.Tool
		field string
	}
	var decls []decl
	for i, t := range specs {
		field := fmt.Sprintf("tools[%d]", i)
		if err := unknownParam(t, field); err != nil {
			return nil, err
		}
		decls = append(decls, decl{t, field})
	}
	if rf != nil {
		switch rf.Type {
		case contracts.FormatJSONSchema:
			params := map[string]json.RawMessage{"schema": rf.Schema}
			if rf.Trigger != "" {
				params["trigger"], _ = json.Marshal(rf.Trigger)
			}
			if rf.Whitespace != "" {
				params["whitespace"], _ = json.Marshal(rf.Whitespace)
			}
			if rf.MaxStringLength != 0 {
				params["max_string_length"], _ = json.Marshal(rf.MaxStringLength)
			}
			decls = append(decls, decl{contracts.Tool{Name: contracts.ToolJSONValidator, Params: params}, "response_format"})
		case contracts.FormatRegex:
			p, _ := json.Marshal(rf.Pattern)
			decls = append(decls, decl{contracts.Tool{Name: contracts.ToolRegexMatcher,
				Params: map[string]json.RawMessage{"pattern": p}}, "response_format"})
		default:
			return nil, &contracts.Error{Code: contracts.CodeInvalidRequest, Field: "response_format.type",
				Message: fmt.Sprintf("type %q is not json_schema or regex", rf.Type)}
		}
	}
	for _, d := range decls {
		if !d.spec.Name.Valid() {
			return nil, &contracts.Error{Code: contracts.CodeUnknownTool, Tool: string(d.spec.Name), Field: d.field + ".name",
				ToolCode: ToolCompileFailed, Message: fmt.Sprintf("tool %q is not an inline tool", d.spec.Name)}
		}
		switch d.spec.Mode {
		case "", contracts.ToolModeStrict, contracts.ToolModeSoft:
		default:
			return nil, requestError(d.spec.Name, d.field+".mode", "mode %q is not strict or soft", d.spec.Mode)
		}
		if err := paramsTooLarge(d.spec, d.field, b); err != nil {
			return nil, err
		}
		key := toolKey{hash: specHash(d.spec), vi: vi, budget: b, context: d.spec.ContextID}
		t := cacheGet(key)
		if t != nil {
			metrics.hits.Add(1)
			s.cacheHits++
		} else {
			t0 := time.Now()
			var err error
			t, err = compileTool(d.spec, d.field, vi, b)
			metrics.nanos.Add(int64(time.Since(t0)))
			if err != nil {
				return nil, err
			}
			metrics.misses.Add(1)
			cachePut(key, t)
		}
		// The field is per declaration; share everything else.
		if t.field != d.field {
			cp := *t
			cp.field = d.field
			t = &cp
		}
		s.tools = append(s.tools, t)
		if t.masks() || t.tox != nil && t.tox.mode != toxRedact {
			s.masks = true
		}
		if t.pii != nil || t.tox != nil && t.tox.mode == toxRedact {
			s.texts = true
		}
	}
	s.compileTime = time.Since(start)
	return s, nil
}

// unknownParam refuses a declared tool's parameter that the tool does not
// have (contracts' tool table), naming it: tools[1].params.foo. A tool
// that is not one is left to Compile's name check.
func unknownParam(spec contracts.Tool, field string) error {
	known := spec.Name.ParamNames()
	if known == nil {
		return nil
	}
	names := make([]string, 0, len(spec.Params))
	for k := range spec.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			return requestError(spec.Name, field+".params."+k, "tool %s has no param %s (its params: %s)", spec.Name, k, strings.Join(known, ", "))
		}
	}
	return nil
}

// maxSchemaBytes bounds a schema's JSON text.
const maxSchemaBytes = 4 << 20

// paramsTooLarge rejects oversized parameters before they are hashed or
// parsed: a pattern longer than the budget allows, a huge schema.
func paramsTooLarge(spec contracts.Tool, field string, b Budget) error {
	for k, raw := range spec.Params {
		limit := maxSchemaBytes
		switch k {
		case "pattern", "patterns":
			// JSON escaping at most sextuples a byte.
			limit = 6*b.MaxPatternBytes + 16
		}
		if len(raw) > limit {
			e := requestError(spec.Name, field+".params."+k, "param is %d bytes, more than the %d allowed", len(raw), limit)
			if k == "pattern" || k == "patterns" {
				e.Code = contracts.CodeInvalidRegex
			}
			return e
		}
	}
	return nil
}

// compileTool compiles one declaration.
func compileTool(spec contracts.Tool, field string, vi *vocab.Index, b Budget) (*compiledTool, error) {
	t := &compiledTool{name: spec.Name, field: field, context: spec.ContextID, soft: spec.Mode == contracts.ToolModeSoft}
	clock := limit.NewClock(b.CompileTimeout)
	pf := func(p string) string { return field + ".params." + p }
	var err error
	switch spec.Name {
	case contracts.ToolJSONValidator:
		raw, ok := spec.Params["schema"]
		if !ok || isNull(raw) {
			return nil, requestError(spec.Name, pf("schema"), "json_validator needs param schema")
		}
		layout, err := jsonLayout(spec, pf)
		if err != nil {
			return nil, err
		}
		t.json, t.notes, err = compileJSONTool(raw, t.soft, layout, vi, b, clock)
		if err != nil {
			return nil, toolError(spec.Name, pf("schema"), err)
		}
		trigger, err := stringParam(spec, "trigger", false, pf)
		if err != nil {
			return nil, err
		}
		if len(trigger) > contracts.MaxTriggerBytes {
			return nil, requestError(spec.Name, pf("trigger"), "trigger is %d bytes, more than the %d allowed", len(trigger), contracts.MaxTriggerBytes)
		}
		if trigger != "" {
			if t.json.trig, err = newTriggerMasks(trigger, vi, t.json.m.Meter); err != nil {
				return nil, toolError(spec.Name, pf("trigger"), err)
			}
		}
	case contracts.ToolRegexMatcher:
		p, err := stringParam(spec, "pattern", true, pf)
		if err != nil {
			return nil, err
		}
		if t.regex, err = compileRegexTool(p, vi, b, clock); err != nil {
			return nil, toolError(spec.Name, pf("pattern"), err)
		}
	case contracts.ToolXMLValidator:
		tags, err := stringsParam(spec, "allowed_tags", true, pf)
		if err != nil {
			return nil, err
		}
		if t.xml, err = newXMLMachine(tags, vi, b); err != nil {
			return nil, paramError(spec.Name, pf("allowed_tags"), err)
		}
	case contracts.ToolPIIRedactor:
		ents, err := stringsParam(spec, "entities", false, pf)
		if err != nil {
			return nil, err
		}
		pats, err := stringsParam(spec, "patterns", false, pf)
		if err != nil {
			return nil, err
		}
		if t.pii, err = compilePII(ents, pats, b, clock); err != nil {
			field := pf("entities")
			var re *automaton.PatternError
			if errors.As(err, &re) {
				field = pf("patterns")
			}
			return nil, paramError(spec.Name, field, err)
		}
	case contracts.ToolToxicityFilter:
		words, err := stringsParam(spec, "words", true, pf)
		if err != nil {
			return nil, err
		}
		mode, err := stringParam(spec, "mode", false, pf)
		if err != nil {
			return nil, err
		}
		canon, ok := contracts.ToxicityMode(mode)
		if !ok {
			return nil, requestError(spec.Name, pf("mode"), "mode %q is not one of %s", mode, strings.Join(contracts.ToxicityModes(), ", "))
		}
		if t.tox, err = compileTox(words, canon, vi, b); err != nil {
			return nil, paramError(spec.Name, pf("words"), err)
		}
	case contracts.ToolRetryOnFail:
		markers, err := stringsParam(spec, "output_contains", true, pf)
		if err != nil {
			return nil, err
		}
		n := 1
		if raw, ok := spec.Params["max_retries"]; ok && !isNull(raw) {
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > contracts.MaxToolRetries {
				return nil, requestError(spec.Name, pf("max_retries"), "must be an integer in [0, %d]", contracts.MaxToolRetries)
			}
		}
		t.retry = &retrySpec{markers: markers, max: n}
	case contracts.ToolSuffix:
		if t.suffix, err = stringParam(spec, "text", true, pf); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// paramError is a parameter that does not compile: regex and budget
// errors keep their codes, anything else is a bad request.
func paramError(name contracts.ToolName, field string, err error) *contracts.Error {
	var re *automaton.PatternError
	if errors.As(err, &re) || errors.Is(err, limit.ErrMemory) || errors.Is(err, limit.ErrCompileTimeout) {
		return toolError(name, field, err)
	}
	return requestError(name, field, "%v", err)
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func stringParam(spec contracts.Tool, name string, required bool, pf func(string) string) (string, error) {
	raw, ok := spec.Params[name]
	if !ok || isNull(raw) {
		if required {
			return "", requestError(spec.Name, pf(name), "%s needs param %s", spec.Name, name)
		}
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", requestError(spec.Name, pf(name), "must be a string")
	}
	if required && s == "" {
		return "", requestError(spec.Name, pf(name), "must not be empty")
	}
	return s, nil
}

func stringsParam(spec contracts.Tool, name string, required bool, pf func(string) string) ([]string, error) {
	raw, ok := spec.Params[name]
	if !ok || isNull(raw) {
		if required {
			return nil, requestError(spec.Name, pf(name), "%s needs param %s", spec.Name, name)
		}
		return nil, nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) != nil {
		return nil, requestError(spec.Name, pf(name), "must be an array of strings")
	}
	for i, s := range ss {
		if s == "" {
			return nil, requestError(spec.Name, fmt.Sprintf("%s[%d]", pf(name), i), "must not be empty")
		}
	}
	if required && len(ss) == 0 {
		return nil, requestError(spec.Name, pf(name), "must not be empty")
	}
	return ss, nil
}

// jsonLayout reads json_validator's layout params: whitespace (compact, the
// default, or pretty) and max_string_length (0, the default: no cap).
func jsonLayout(spec contracts.Tool, pf func(string) string) (grammar.Layout, error) {
	var l grammar.Layout
	ws, err := stringParam(spec, "whitespace", false, pf)
	if err != nil {
		return l, err
	}
	switch contracts.Whitespace(ws) {
	case "", contracts.WhitespaceCompact:
	case contracts.WhitespacePretty:
		l.MaxSpace = grammar.PrettySpace
	default:
		return l, requestError(spec.Name, pf("whitespace"), "whitespace %q is not compact or pretty", ws)
	}
	if raw, ok := spec.Params["max_string_length"]; ok && !isNull(raw) {
		var n int
		if json.Unmarshal(raw, &n) != nil || n < 0 || n > contracts.MaxStringLengthLimit {
			return l, requestError(spec.Name, pf("max_string_length"), "must be an integer in [0, %d]", contracts.MaxStringLengthLimit)
		}
		l.MaxStringLen = int32(n)
	}
	return l, nil
}

// compileJSONTool compiles a JSON Schema to a grammar machine and its
// validator, written as layout says.
func compileJSONTool(raw json.RawMessage, soft bool, layout grammar.Layout, vi *vocab.Index, b Budget, clock *limit.Clock) (*jsonTool, []string, error) {
	lim := schema.Limits{
		MaxSchemaNodes:  b.MaxSchemaNodes,
		MaxPatternBytes: b.MaxPatternBytes,
		MaxRegexInsts:   b.MaxRegexInsts,
		MaxDFAStates:    b.MaxDFAStates,
		MaxMemoryBytes:  b.MaxMemoryBytes,
		MaxThreads:      b.MaxThreads,
		Layout:          layout,
	}
	m, val, notes, err := schema.Compile(raw, soft, vi, lim, clock)
	if err != nil {
		return nil, nil, err
	}
	return &jsonTool{m: m, val: val}, notes, nil
}

// compileRegexTool compiles a regex_matcher pattern (whole-output match).
func compileRegexTool(pattern string, vi *vocab.Index, b Budget, clock *limit.Clock) (*regexTool, error) {
	lim := automaton.Limits{MaxBytes: b.MaxPatternBytes, MaxInsts: b.MaxRegexInsts}
	re, err := automaton.Parse(pattern, lim)
	if err != nil {
		return nil, err
	}
	prog, err := automaton.Compile([]*syntax.Regexp{re}, []automaton.Mode{automaton.ModeFull}, lim, clock)
	if err != nil {
		return nil, &automaton.PatternError{Pattern: pattern, Message: err.Error()}
	}
	mem := limit.NewMeter(b.MaxMemoryBytes)
	if err := mem.Charge(int64(prog.InstCount()) * 48); err != nil {
		return nil, err
	}
	d := automaton.NewDFA(prog, b.MaxDFAStates, b.MaxMemoryBytes/2, mem)
	// The second check: Go's own engine, leftmost-longest, so a match of
	// the whole output is found when there is one. Compiling is bounded by
	// the estimate above.
	full, err := regexp.Compile(pattern)
	if err != nil {
		return nil, &automaton.PatternError{Pattern: pattern, Message: err.Error()}
	}
	full.Longest()
	return &regexTool{m: newRegexMachine(d, vi, mem), re: full}, nil
}
