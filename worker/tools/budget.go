package tools

import (
	"fmt"
	"time"
)

// Budget bounds what one job's tools may spend. The zero value means "all
// defaults"; call WithDefaults to see them. A job may lower any field; the
// worker caps what a job may raise.
//
// A job's tools are grouped in pools by their context_id
// (contracts.Tool.ContextID; tools without one share the default pool).
// MaxMemoryBytes and MaxStepFuel apply to each pool: the tools of one pool
// share them, tools of different pools each have their own, so a tool
// that exhausts its pool fails alone (and with on_tool_failure
// retry_without_tool is dropped while the others go on). Each pool also
// has its own compiled copy of its tools (the compile cache is keyed by
// context_id), so pools never share automata or mask caches. The default
// pool shares the step fuel; its memory stays capped per tool, as before
// pools existed.
type Budget struct {
	// MaxMemoryBytes caps the memory each tool holds, and the tools of
	// one named pool (context_id) together: compiled automata, cached
	// masks, parser threads and held-back text. Going over fails the tool
	// with TOOL_MEMORY_EXHAUSTED (a full mask cache stops growing
	// instead). Defaults to 64 MiB.
	MaxMemoryBytes int64
	// MaxStepFuel caps the primitive steps (trie nodes visited, automaton
	// transitions, parser-thread steps) the tools of one pool take in one
	// Mask, Accept, Text or Finish call. Going over fails the tool that ran
	// out with TOOL_STEP_BUDGET. Defaults to 4,000,000 (roughly 20–60 ms
	// of one core).
	MaxStepFuel int64
	// CompileTimeout caps the time one Compile may take per tool. Going over
	// fails with TOOL_TIMEOUT. Defaults to 1 second.
	CompileTimeout time.Duration
	// MaxRegexInsts caps the estimated size of a regular expression's
	// program, computed after parsing and before compiling. Defaults to
	// 50,000.
	MaxRegexInsts int
	// MaxPatternBytes caps the length of a regular expression's source text,
	// checked before parsing. Defaults to 32 KiB.
	MaxPatternBytes int
	// MaxDFAStates caps the states a lazy DFA keeps cached; past it the
	// automaton keeps working without caching new states (slower, bounded
	// memory). Defaults to 10,000.
	MaxDFAStates int
	// MaxThreads caps the parser threads a JSON grammar may follow at once
	// (anyOf branches still alive). Defaults to 2,048.
	MaxThreads int
	// MaxSchemaNodes caps the grammar nodes a JSON Schema compiles to.
	// Defaults to 20,000.
	MaxSchemaNodes int
	// MaxHoldBack caps the bytes a streaming text tool (pii_redactor,
	// toxicity_filter in redact mode) may hold back. Defaults to 256.
	MaxHoldBack int
}

// Defaults of Budget.
const (
	DefaultMaxMemoryBytes  = 64 << 20
	DefaultMaxStepFuel     = 4_000_000
	DefaultCompileTimeout  = time.Second
	DefaultMaxRegexInsts   = 50_000
	DefaultMaxPatternBytes = 32 << 10
	DefaultMaxDFAStates    = 10_000
	DefaultMaxThreads      = 2048
	DefaultMaxSchemaNodes  = 20_000
	DefaultMaxHoldBack     = 256
)

// WithDefaults returns b with every unset (zero or negative) field set to
// its default.
func (b Budget) WithDefaults() Budget {
	if b.MaxMemoryBytes <= 0 {
		b.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if b.MaxStepFuel <= 0 {
		b.MaxStepFuel = DefaultMaxStepFuel
	}
	if b.CompileTimeout <= 0 {
		b.CompileTimeout = DefaultCompileTimeout
	}
	if b.MaxRegexInsts <= 0 {
		b.MaxRegexInsts = DefaultMaxRegexInsts
	}
	if b.MaxPatternBytes <= 0 {
		b.MaxPatternBytes = DefaultMaxPatternBytes
	}
	if b.MaxDFAStates <= 0 {
		b.MaxDFAStates = DefaultMaxDFAStates
	}
	if b.MaxThreads <= 0 {
		b.MaxThreads = DefaultMaxThreads
	}
	if b.MaxSchemaNodes <= 0 {
		b.MaxSchemaNodes = DefaultMaxSchemaNodes
	}
	if b.MaxHoldBack <= 0 {
		b.MaxHoldBack = DefaultMaxHoldBack
	}
	return b
}

// String lists the budget's fields, for logs.
func (b Budget) String() string {
	return fmt.Sprintf("mem=%d fuel=%d compile=%s insts=%d pat=%d dfa=%d threads=%d nodes=%d hold=%d",
		b.MaxMemoryBytes, b.MaxStepFuel, b.CompileTimeout, b.MaxRegexInsts, b.MaxPatternBytes,
		b.MaxDFAStates, b.MaxThreads, b.MaxSchemaNodes, b.MaxHoldBack)
}
