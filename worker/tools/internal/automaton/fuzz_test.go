package automaton_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
)

// fuzzLimits are a job's default limits (tools.Budget's defaults) with
// step fuel to spare.
var fuzzLimits = toolstest.SearchLimits{
	Pattern:        automaton.Limits{MaxBytes: 32 << 10, MaxInsts: 50_000},
	CompileTimeout: time.Second,
	MaxDFAStates:   10_000,
	MaxMemoryBytes: 64 << 20,
	MaxStepFuel:    1 << 30,
}

// FuzzRegexSearch compares the lazy DFA with Go's regexp on patterns both
// accept: MatchString and the DFA's search must agree on valid UTF-8 (the
// DFA matches characters as UTF-8 byte sequences, so a stray byte matches
// nothing, where Go reads it as U+FFFD).
func FuzzRegexSearch(f *testing.F) {
	for _, s := range [][2]string{
		{`a+b`, "xaab"}, {`^(a|ab)*$`, "abab"}, {`(?m)^x$`, "a\nx"}, {`[^a-c]{2,3}`, "dd"},
		{`(?i)straße`, "STRASSE"}, {`\pL+\d`, "é1"}, {`a$`, "a\n"}, {`(?s).`, "\n"}, {`\A\z`, ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, input string) {
		if len(pattern) > 64 || len(input) > 256 || !utf8.ValidString(input) {
			return
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		got, err := toolstest.RegexSearch(pattern, input, fuzzLimits)
		if err != nil {
			if strings.Contains(err.Error(), "word-boundary") {
				return
			}
			t.Fatalf("%q on %q: %v", pattern, input, err)
		}
		if want := re.MatchString(input); got != want {
			t.Fatalf("%q on %q: DFA %v, regexp %v", pattern, input, got, want)
		}
	})
}
