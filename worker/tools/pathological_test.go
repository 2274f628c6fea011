package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/automaton"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

type pathoEntry struct {
	ID        string          `json:"id"`
	Pattern   *string         `json:"pattern"`
	Generator *pathoGen       `json:"pattern_generator"`
	Schema    json.RawMessage `json:"json_schema"`
	Input     *struct {
		Repeat string `json:"repeat"`
		Count  int    `json:"count"`
		Suffix string `json:"suffix"`
	} `json:"input"`
	MatchInput *string `json:"go_match_input"`
	GoCompile  string  `json:"go_compile"`
	GoMatch    *bool   `json:"go_match"`
	Class      string  `json:"class"`
}

type pathoGen struct {
	Repeat        string `json:"repeat"`
	Count         int    `json:"count"`
	PrefixRepeat  string `json:"prefix_repeat"`
	Middle        string `json:"middle"`
	SuffixRepeat  string `json:"suffix_repeat"`
	AlternationOf string `json:"alternation_of"`
}

func (e *pathoEntry) pattern() string {
	if e.Pattern != nil {
		return *e.Pattern
	}
	g := e.Generator
	switch {
	case g.AlternationOf != "":
		parts := make([]string, g.Count)
		for i := range parts {
			parts[i] = fmt.Sprintf(g.AlternationOf, i)
		}
		return "(" + strings.Join(parts, "|") + ")"
	case g.PrefixRepeat != "":
		return strings.Repeat(g.PrefixRepeat, g.Count) + g.Middle + strings.Repeat(g.SuffixRepeat, g.Count)
	}
	return strings.Repeat(g.Repeat, g.Count)
}

func (e *pathoEntry) input() (string, bool) {
	switch {
	case e.MatchInput != nil:
		return *e.MatchInput, true
	case e.Input != nil:
		return strings.Repeat(e.Input.Repeat, e.Input.Count) + e.Input.Suffix, true
	}
	return "", false
}

// pathoBudget is the budget of the pathological entries: 64 MB and a step
// fuel that stays well under 100 ms of CPU.
var pathoBudget = Budget{MaxMemoryBytes: 64 << 20, CompileTimeout: 100 * time.Millisecond, MaxStepFuel: 1_000_000}

// regexSearch reports whether pattern matches somewhere in input (Go's
// MatchString semantics), running the lazy DFA under budget b.
func regexSearch(pattern, input string, b Budget) (bool, error) {
	b = b.WithDefaults()
	return toolstest.RegexSearch(pattern, input, toolstest.SearchLimits{
		Pattern:        automaton.Limits{MaxBytes: b.MaxPatternBytes, MaxInsts: b.MaxRegexInsts},
		CompileTimeout: b.CompileTimeout,
		MaxDFAStates:   b.MaxDFAStates,
		MaxMemoryBytes: b.MaxMemoryBytes,
		MaxStepFuel:    b.MaxStepFuel,
	})
}

func loadPatho(t testing.TB) []pathoEntry {
	b, err := os.ReadFile(filepath.Join(toolstest.SharedDir(t), "testdata", "pathological-regex", "patterns.json"))
	if err != nil {
		t.Skip("pathological-regex not present:", err)
	}
	var es []pathoEntry
	if err := json.Unmarshal(b, &es); err != nil {
		t.Fatal(err)
	}
	return es
}

// structured reports whether err is a contract error that names the tool
// and carries a tool code.
func structured(err error) bool {
	var ce *contracts.Error
	return errors.As(err, &ce) && ce.Tool != "" && ce.ToolCode != ""
}

// TestPathologicalRegex gives every entry of patterns.json a result or a
// structured error within 100 ms and 64 MB: compiling the regex_matcher
// (or json_validator), one mask, and, when the entry has an input, a search
// over it whose answer must agree with Go's.
func TestPathologicalRegex(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	vocab.IndexOf(tok) // once per process, not per job
	t.Logf("vocabulary index (trie of %d tokens): %v", tok.VocabSize(), time.Since(t0))
	for _, e := range loadPatho(t) {
		var pat string
		if e.Schema == nil {
			pat = e.pattern()
		}
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		c0 := threadCPU()
		var outcome string
		if e.Schema != nil {
			set, err := compileSchema(e.Schema, tok)
			switch {
			case err != nil && !structured(err):
				t.Errorf("%s: unstructured error %v", e.ID, err)
			case err != nil:
				outcome = "error: " + err.Error()
			default:
				// Generate a valid instance of moderate size and time every mask.
				r := set.NewRun()
				mask := make([]uint64, set.vi.Words)
				var worst time.Duration
				text := pathoInstance(e.ID)
				for _, id := range tok.Encode(text, tokenizer.EncodeOptions{}) {
					t1 := time.Now()
					if _, err := r.Mask(mask); err != nil {
						t.Fatalf("%s: %v", e.ID, err)
					}
					if d := time.Since(t1); d > worst {
						worst = d
					}
					if !vocab.MaskHas(mask, id) {
						t.Fatalf("%s: token %d of a valid instance masked", e.ID, id)
					}
					if err := r.Accept(id); err != nil {
						t.Fatalf("%s: %v", e.ID, err)
					}
				}
				outcome = fmt.Sprintf("compiled; worst mask %v", worst)
			}
		} else {
			p, _ := json.Marshal(pat)
			set, err := Compile([]contracts.Tool{{Name: contracts.ToolRegexMatcher, Params: map[string]json.RawMessage{"pattern": p}}}, nil, tok, pathoBudget)
			switch {
			case err != nil && !structured(err):
				t.Errorf("%s: unstructured error %v", e.ID, err)
			case err != nil:
				outcome = "compile error: " + err.Error()
			default:
				mask := make([]uint64, set.vi.Words)
				_, merr := set.NewRun().Mask(mask)
				if merr != nil && !structured(merr) {
					t.Errorf("%s: unstructured mask error %v", e.ID, merr)
				}
				outcome = fmt.Sprintf("compiled; mask err=%v", merr)
				if in, ok := e.input(); ok {
					got, err := regexSearch(pat, in, pathoBudget)
					switch {
					case err != nil:
						outcome += "; search: " + err.Error()
					case e.GoMatch != nil && got != *e.GoMatch:
						t.Errorf("%s: search = %v, Go says %v", e.ID, got, *e.GoMatch)
					default:
						outcome += fmt.Sprintf("; search = %v", got)
					}
				}
			}
			if strings.HasPrefix(e.GoCompile, "error") && err == nil {
				t.Errorf("%s: Go rejects this pattern (%s) but it compiled", e.ID, e.GoCompile)
			}
		}
		cpu := threadCPU() - c0
		el := time.Since(t0)
		runtime.ReadMemStats(&ms1)
		alloc := ms1.TotalAlloc - ms0.TotalAlloc
		t.Logf("%-28s %-26s cpu %8v wall %8v %6.1f MB  %.120s", e.ID, e.Class, cpu.Round(time.Microsecond), el.Round(time.Microsecond), float64(alloc)/(1<<20), outcome)
		if alloc > 64<<20 {
			t.Errorf("%s: allocated %d bytes (> 64 MB)", e.ID, alloc)
		}
		if cpu > 100*time.Millisecond*timeSlack {
			t.Errorf("%s: took %v of CPU (> 100 ms)", e.ID, cpu)
		}
	}
}

// pathoInstance returns a valid instance for the JSON-Schema entries.
func pathoInstance(id string) string {
	long := strings.Repeat("lorem ipsum dolor ", 20)
	switch id {
	case "json-maxlength-large":
		return `{"content":"` + long + `"}`
	case "json-minlength-gt128":
		return `{"description":"` + long[:250] + `"}`
	}
	return `{"a":"x","b":["y","z"],"c":"` + long[:150] + `","d":["w"],"e":[],"f":["v"]}`
}

// TestPathologicalBesideNormalJobs runs the pathological entries beside 15
// normal jobs: the normal jobs' outputs are the same as when they run
// alone.
func TestPathologicalBesideNormalJobs(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	entries := loadPatho(t)
	schema := `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","name"]}`
	set, err := compileSchema([]byte(schema), tok)
	if err != nil {
		t.Fatal(err)
	}
	// A normal job: greedy decoding that always picks the smallest allowed
	// token id not yet tried too often; deterministic.
	job := func(seed int) (string, error) {
		r := set.NewRun()
		mask := make([]uint64, set.vi.Words)
		var out []byte
		for step := 0; step < 60; step++ {
			if _, err := r.Mask(mask); err != nil {
				return "", err
			}
			pick := pickToken(mask, seed+step)
			if pick < 0 {
				break
			}
			if set.vi.IsEOG(pick) || r.Complete() {
				break
			}
			if err := r.Accept(pick); err != nil {
				return "", err
			}
			out = append(out, set.vi.Pieces[pick]...)
			if r.Complete() {
				break
			}
		}
		return string(out), nil
	}
	want := make([]string, 15)
	for i := range want {
		if want[i], err = job(i); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	got := make([]string, 15)
	errs := make([]error, 15)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, e := range entries {
			if e.Schema != nil {
				compileSchema(e.Schema, tok)
				continue
			}
			p, _ := json.Marshal(e.pattern())
			if s, err := Compile([]contracts.Tool{{Name: contracts.ToolRegexMatcher, Params: map[string]json.RawMessage{"pattern": p}}}, nil, tok, pathoBudget); err == nil {
				s.NewRun().Mask(make([]uint64, s.vi.Words))
			}
		}
	}()
	for i := 0; i < 15; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], errs[i] = job(i)
		}(i)
	}
	wg.Wait()
	for i := range want {
		if errs[i] != nil || got[i] != want[i] {
			t.Errorf("job %d: got %q (%v), want %q", i, got[i], errs[i], want[i])
		}
	}
}

// pickToken picks an allowed token deterministically from seed.
func pickToken(mask []uint64, seed int) int32 {
	n := vocab.MaskCount(mask)
	if n == 0 {
		return -1
	}
	k := (seed*7919 + 13) % n
	for w, bits := range mask {
		for bits != 0 {
			b := bits & -bits
			if k == 0 {
				return int32(w*64 + trailingZeros(b))
			}
			k--
			bits &^= b
		}
	}
	return -1
}
