package tools

import (
	"bufio"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

type benchFile struct {
	path   string
	Schema json.RawMessage `json:"schema"`
	Tests  []struct {
		Description string          `json:"description"`
		Valid       bool            `json:"valid"`
		Data        json.RawMessage `json:"data"`
	} `json:"tests"`
}

// loadBench reads the jsonschemabench subset listed in index.tsv.
func loadBench(t testing.TB) []benchFile {
	t.Helper()
	dir := filepath.Join(toolstest.SharedDir(t), "testdata", "jsonschemabench")
	f, err := os.Open(filepath.Join(dir, "index.tsv"))
	if err != nil {
		t.Skip("jsonschemabench not present:", err)
	}
	defer f.Close()
	var out []benchFile
	s := bufio.NewScanner(f)
	s.Scan() // header
	for s.Scan() {
		path, _, _ := strings.Cut(s.Text(), "\t")
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		var bf benchFile
		if err := json.Unmarshal(b, &bf); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		bf.path = path
		out = append(out, bf)
	}
	return out
}

// durStats summarises durations.
type durStats []time.Duration

func (d durStats) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append(durStats(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

// timedFeed feeds ids into a fresh run, timing every Mask; it reports
// whether every token was allowed and the end allowed.
func timedFeed(t testing.TB, set *Set, ids []int32, times *durStats) bool {
	return timedFeedCPU(t, set, ids, times, nil)
}

// timedFeedCPU is timedFeed that also records the thread CPU time of every
// Mask in cpu (when not nil).
func timedFeedCPU(t testing.TB, set *Set, ids []int32, times, cpu *durStats) bool {
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	// Under the race detector masks are checked on a prefix only (they are
	// ten times slower); the rest is accepted token by token.
	limit := len(ids)
	if timeSlack > 1 && limit > 40 {
		limit = 40
	}
	for i := 0; i <= len(ids); i++ {
		if i > limit && i < len(ids) {
			if r.Accept(ids[i]) != nil {
				return false
			}
			continue
		}
		c0 := threadCPU()
		t0 := time.Now()
		_, err := r.Mask(mask)
		*times = append(*times, time.Since(t0))
		if cpu != nil {
			*cpu = append(*cpu, threadCPU()-c0)
		}
		if err != nil {
			t.Errorf("mask: %v", err)
			return false
		}
		if i == len(ids) {
			return vocab.MaskHas(mask, set.vi.EOG[0]) && r.CanEnd()
		}
		if !vocab.MaskHas(mask, ids[i]) {
			return false
		}
		if r.Accept(ids[i]) != nil {
			return false
		}
	}
	return true
}

// TestJSONSchemaBench compiles the jsonschemabench subset (strict mode,
// and soft mode for what strict refuses) and feeds its instances token by
// token (masks checked at every token), then to the final validation: at
// least 97% of the schemas compile (strictly or softly; the rest are
// refused naming the keyword); of those that compile strictly, every valid
// instance is accepted and at least 99% of the invalid ones are rejected
// (by the mask, or by the final validation for keywords checked after
// generation); no crash or timeout. Mask and compile times are logged
// (-v).
func TestJSONSchemaBench(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	files := loadBench(t)
	rat := loadRatchet(t, "jsonschemabench_unsupported.tsv")
	var compiled, softCompiled, validAcc, validTotal, maskRej, lateRej, invalidTotal int
	var compileTimes, maskTimes, maskCPU, warmCPU durStats
	for _, bf := range files {
		t0 := time.Now()
		set, err := compileSchema(bf.Schema, tok)
		compileTimes = append(compileTimes, time.Since(t0))
		if err != nil {
			var ce *contracts.Error
			if !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidSchema {
				t.Errorf("%s: compile failed without a schema error (budget?): %v", bf.path, err)
				continue
			}
			if !strings.Contains(ce.Message, "keyword") && !strings.Contains(ce.Message, "schema does not compile") {
				t.Errorf("%s: refused without naming the keyword: %v", bf.path, err)
			}
			if !rat.note(bf.path, ce.Message) && !*update {
				t.Errorf("%s: unexpected compile error: %v", bf.path, err)
			}
			soft := contracts.Tool{Name: contracts.ToolJSONValidator, Mode: contracts.ToolModeSoft,
				Params: map[string]json.RawMessage{"schema": bf.Schema}}
			if _, err := Compile([]contracts.Tool{soft}, nil, tok, Budget{}); err == nil {
				softCompiled++
			}
			continue
		}
		compiled++
		for _, tc := range bf.Tests {
			text := encodeInstance(t, tc.Data)
			ids := tok.Encode(text, tokenizer.EncodeOptions{})
			ok := timedFeedCPU(t, set, ids, &maskTimes, &maskCPU)
			if tc.Valid && timeSlack == 1 {
				// The same instance again: caches warm.
				timedFeedCPU(t, set, ids, new(durStats), &warmCPU)
			}
			final := ok && finalValid(set, text)
			if tc.Valid {
				validTotal++
				if final {
					validAcc++
				} else {
					t.Errorf("%s: valid instance rejected: %.300s", bf.path, text)
				}
			} else {
				invalidTotal++
				switch {
				case !ok:
					maskRej++
				case !final:
					lateRej++
				default:
					t.Logf("%s: invalid instance accepted (%s): %.200s", bf.path, tc.Description, text)
				}
			}
		}
	}
	pct := func(a, b int) float64 {
		if b == 0 {
			return 100
		}
		return 100 * float64(a) / float64(b)
	}
	t.Logf("jsonschemabench: %d/%d schemas compile (%.1f%%), %d more in soft mode: %d/%d (%.1f%%); %d refused",
		compiled, len(files), pct(compiled, len(files)), softCompiled, compiled+softCompiled, len(files),
		pct(compiled+softCompiled, len(files)), len(files)-compiled-softCompiled)
	t.Logf("valid accepted %d/%d; invalid rejected %d/%d (%.2f%%): %d by the mask, %d by the final validation",
		validAcc, validTotal, maskRej+lateRej, invalidTotal, pct(maskRej+lateRej, invalidTotal), maskRej, lateRej)
	t.Logf("compile time p50 %v p99 %v max %v", compileTimes.pct(0.5), compileTimes.pct(0.99), compileTimes.pct(1))
	t.Logf("mask wall time (%d masks, first pass, cold caches): p50 %v p99 %v max %v",
		len(maskTimes), maskTimes.pct(0.5), maskTimes.pct(0.99), maskTimes.pct(1))
	t.Logf("mask thread CPU time (same masks):             p50 %v p99 %v max %v",
		maskCPU.pct(0.5), maskCPU.pct(0.99), maskCPU.pct(1))
	t.Logf("mask thread CPU time, valid instances again (%d masks, warm): p50 %v p99 %v max %v",
		len(warmCPU), warmCPU.pct(0.5), warmCPU.pct(0.99), warmCPU.pct(1))
	if pct(compiled+softCompiled, len(files)) < 97 {
		t.Errorf("compile coverage (strict or soft) %.1f%% < 97%%", pct(compiled+softCompiled, len(files)))
	}
	if pct(maskRej+lateRej, invalidTotal) < 99 {
		t.Errorf("invalid rejected %.2f%% < 99%%", pct(maskRej+lateRej, invalidTotal))
	}
	if *update {
		rat.save(t, "# jsonschemabench subset schemas json_validator does not compile (strict mode).\n"+
			"# Regenerate with: go test ./worker/tools -run TestJSONSchemaBench -update\n"+
			"# path<TAB>error\n")
	}
}

// sampleOutcome is how one sampled generation ended.
type sampleOutcome int

const (
	sampleValid   sampleOutcome = iota // finished, passed the final validation
	sampleLate                         // finished, refused by the final validation (a keyword checked after generation)
	sampleLimit                        // still going at the token limit
	sampleDeadEnd                      // the mask allowed nothing, not even the end
)

// sampleOnce generates up to n tokens from a fresh run of set, picking
// allowed tokens at random (ending, when allowed, one time in four, and
// leaning to closing bytes as it goes), and finishes the run.
func sampleOnce(t testing.TB, set *Set, rng *rand.Rand, n int) (sampleOutcome, string, error) {
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	var out []byte
	const closing = `"}],0123456789`
	for step := 0; ; step++ {
		if r.Complete() {
			break
		}
		if step == n {
			return sampleLimit, string(out), nil
		}
		constrained, err := r.Mask(mask)
		if err != nil {
			return sampleDeadEnd, string(out), err
		}
		if !constrained {
			set.vi.FillAll(mask)
		}
		var allowed []int32
		eog := false
		for w, bits := range mask {
			for bits != 0 {
				b := bits & -bits
				id := int32(w*64 + trailingZeros(b))
				bits &^= b
				if set.vi.IsEOG(id) {
					eog = true
					continue
				}
				allowed = append(allowed, id)
			}
		}
		if eog && (len(allowed) == 0 || rng.Intn(4) == 0 && step > 3) {
			break
		}
		if len(allowed) == 0 {
			return sampleDeadEnd, string(out), nil
		}
		pick := allowed[rng.Intn(len(allowed))]
		if rng.Intn(n) < step*2 {
			for try := 0; try < 200; try++ {
				id := allowed[rng.Intn(len(allowed))]
				if strings.ContainsAny(string(set.vi.Pieces[id]), closing) {
					pick = id
					break
				}
			}
		}
		if err := r.Accept(pick); err != nil {
			t.Fatalf("accept %q after %q: %v", set.vi.Pieces[pick], out, err)
		}
		out = append(out, set.vi.Pieces[pick]...)
	}
	if !r.CanEnd() {
		return sampleDeadEnd, string(out), nil
	}
	if _, err := r.Finish(); err != nil {
		return sampleLate, string(out), err
	}
	return sampleValid, string(out), nil
}

// knownDeadEnds are bench schemas where sampling may reach a dead end the
// grammar does not foresee. None now: the one there was (o63935, a pattern
// needing more characters than its maxLength left) is foreseen by lenRoom.
var knownDeadEnds = map[string]bool{}

// TestJSONSchemaBenchSampling samples an output from every bench schema
// that compiles (strictly, or in soft mode), picking tokens at random under
// the masks, and counts how each ended: finished and valid, finished and
// refused by the final validation (allowed only for a schema with a
// keyword checked after generation, whose report says so), at the token
// limit, or at a dead end (allowed only for such a schema too).
func TestJSONSchemaBenchSampling(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	files := loadBench(t)
	rng := rand.New(rand.NewSource(7))
	every := 1
	if testing.Short() || timeSlack > 1 {
		every = 15
	}
	var counts [4]int
	tried := 0
	for i, bf := range files {
		if i%every != 0 {
			continue
		}
		set, err := compileSchema(bf.Schema, tok)
		if err != nil {
			soft := contracts.Tool{Name: contracts.ToolJSONValidator, Mode: contracts.ToolModeSoft,
				Params: map[string]json.RawMessage{"schema": bf.Schema}}
			if set, err = Compile([]contracts.Tool{soft}, nil, tok, Budget{}); err != nil {
				continue
			}
		}
		tried++
		notes := set.tools[0].notes
		res, out, err := sampleOnce(t, set, rng, 300)
		counts[res]++
		switch {
		case res == sampleLate && len(notes) == 0:
			t.Errorf("%s: sampled output fails validation with nothing checked after generation: %v\n%s", bf.path, err, out)
		case res == sampleLate:
			t.Logf("%s: refused at the end (%s): %v", bf.path, strings.Join(notes, "; "), err)
		case res == sampleDeadEnd && len(notes) == 0 && !knownDeadEnds[bf.path]:
			t.Errorf("%s: dead end (%v) after %q", bf.path, err, out)
		case res == sampleDeadEnd:
			t.Logf("%s: dead end (%v) after %.200q (%s)", bf.path, err, out, strings.Join(notes, "; "))
		}
	}
	t.Logf("sampled %d schemas: %d finished and validated, %d finished and refused by the final validation, %d at the 300-token limit, %d dead ends",
		tried, counts[sampleValid], counts[sampleLate], counts[sampleLimit], counts[sampleDeadEnd])
}

// BenchmarkMask measures warm masks along one instance of a bench schema
// (every step of the instance, caches filled by a first pass).
func BenchmarkMask(b *testing.B) {
	tok := toolstest.LlamaVocab(b)
	schema := `{"type":"object","properties":{"id":{"type":"integer","minimum":0},"email":{"type":"string","format":"email"},` +
		`"tags":{"type":"array","items":{"type":"string","maxLength":20}},"note":{"type":"string"}},"required":["id"]}`
	set, err := compileSchema([]byte(schema), tok)
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(`{"id":42,"email":"john.doe@example.com","tags":["a","bb"],"note":"Hello there, this is a note."}`, tokenizer.EncodeOptions{})
	timedFeed(b, set, ids, new(durStats))
	mask := make([]uint64, set.vi.Words)
	b.ResetTimer()
	steps := 0
	for i := 0; i < b.N; i++ {
		r := set.NewRun()
		for _, id := range ids {
			r.Mask(mask)
			r.Accept(id)
			steps++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/mask")
}

// BenchmarkCompileBench compiles the bench schemas (no cache hits).
func BenchmarkCompileBench(b *testing.B) {
	tok := toolstest.LlamaVocab(b)
	files := loadBench(b)
	for i := 0; i < b.N; i++ {
		budget := Budget{CompileTimeout: time.Second + time.Duration(i)} // a fresh cache key
		for _, bf := range files {
			Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator, Params: map[string]json.RawMessage{"schema": bf.Schema}}}, nil, tok, budget)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(files)), "ns/schema")
}
