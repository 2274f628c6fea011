package tools

import (
	"encoding/json"
	"errors"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// fakeVocab is a small vocabulary: EOG, every single byte, and some
// multi-byte pieces that cut words and JSON in awkward places.
type fakeVocab struct{ pieces [][]byte }

func (v *fakeVocab) VocabSize() int        { return len(v.pieces) }
func (v *fakeVocab) Piece(id int32) []byte { return append([]byte(nil), v.pieces[id]...) }
func (v *fakeVocab) IsEOG(id int32) bool   { return id == 0 }
func (v *fakeVocab) id(s string) int32     { return v.lookup(s) }
func (v *fakeVocab) lookup(s string) int32 {
	for i, p := range v.pieces {
		if i > 0 && string(p) == s {
			return int32(i)
		}
	}
	return -1
}

var fake = func() *fakeVocab {
	v := &fakeVocab{pieces: [][]byte{[]byte("</s>")}}
	for b := 0; b < 256; b++ {
		v.pieces = append(v.pieces, []byte{byte(b)})
	}
	for _, s := range []string{"ab", "bad", "ba", "ad", "Ba", "BAD", "{\"", "\":", "\",\"", "\"}", "true", "null",
		"12", "hello", " world", "@", ".com", "<b>", "</b>", "<i>", "</i>", "john", ".doe", "example", "555", "-", "41",
		"11", " 11", "1111", "abc", "xyz", "\\n", "é", "\xc3", "\xa9", "\"name", "name", "\":\"", "[\"", "\"]"} {
		v.pieces = append(v.pieces, []byte(s))
	}
	return v
}()

// encodeGreedy tokenizes s with the longest pieces of v.
func encodeGreedy(v Vocab, s string) []int32 {
	var out []int32
	for len(s) > 0 {
		best, bestLen := int32(-1), 0
		for id := int32(1); int(id) < v.VocabSize(); id++ {
			p := v.Piece(id)
			if len(p) > bestLen && strings.HasPrefix(s, string(p)) {
				best, bestLen = id, len(p)
			}
		}
		out = append(out, best)
		s = s[bestLen:]
	}
	return out
}

func tool(name contracts.ToolName, params map[string]any) contracts.Tool {
	t := contracts.Tool{Name: name, Params: map[string]json.RawMessage{}}
	for k, v := range params {
		b, _ := json.Marshal(v)
		t.Params[k] = b
	}
	return t
}

func mustCompile(t testing.TB, v Vocab, b Budget, tools ...contracts.Tool) *Set {
	t.Helper()
	s, err := Compile(tools, nil, v, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// generate samples up to n tokens under the masks with rng; closing, when
// set, biases the choice towards tokens that contain one of its bytes as
// the output grows. It returns the accepted pieces and whether the end was
// reached (EOG allowed and chosen, or Complete).
func generate(t testing.TB, set *Set, rng *rand.Rand, n int, closing string) (string, *Run) {
	t.Helper()
	return generateFrom(t, set, set.NewRun(), rng, n, closing)
}

// generateFrom is generate going on from r.
func generateFrom(t testing.TB, set *Set, r *Run, rng *rand.Rand, n int, closing string) (string, *Run) {
	t.Helper()
	mask := make([]uint64, set.vi.Words)
	var out []byte
	for step := 0; step < n; step++ {
		constrained, err := r.Mask(mask)
		if err != nil {
			t.Fatalf("mask after %q: %v", out, err)
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
			if err := r.Accept(set.vi.EOG[0]); err != nil {
				t.Fatalf("accept EOG after %q: %v", out, err)
			}
			return string(out), r
		}
		if len(allowed) == 0 {
			t.Fatalf("empty mask after %q", out)
		}
		pick := allowed[rng.Intn(len(allowed))]
		if closing != "" && rng.Intn(n) < step*2 {
			// A few tries at a token holding one of the closing bytes.
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
		if r.Complete() {
			return string(out), r
		}
	}
	return string(out), r
}

// TestJSONGenerationValid samples outputs under json_validator masks: every
// finished output passes the validator (Finish's second check).
func TestJSONGenerationValid(t *testing.T) {
	t.Parallel()
	schemas := []string{
		`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":-3,"maximum":120},"ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false}`,
		`{"type":"array","items":{"enum":["ab","bad",12,null]},"minItems":1,"maxItems":3,"uniqueItems":true}`,
		`{"anyOf":[{"type":"string","pattern":"^a+b$"},{"type":"number","exclusiveMinimum":0.5,"maximum":2,"multipleOf":0.25}]}`,
		`{"type":"object","patternProperties":{"^x":{"type":"integer"}},"additionalProperties":{"type":"string","format":"date"},"maxProperties":2}`,
		`{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n"}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/n"}`,
		`{"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"string"}},"required":["k"],"additionalProperties":false},{"type":"object","properties":{"k":{"const":"b"},"y":{"type":"number"}},"required":["k"],"additionalProperties":false}]}`,
		`{"type":"string","format":"email"}`,
		`{"type":"string","minLength":3,"maxLength":5}`,
	}
	rng := rand.New(rand.NewSource(1))
	for _, sc := range schemas {
		set, err := compileSchema([]byte(sc), fake)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		finished := 0
		for i := 0; i < 60; i++ {
			out, r := generate(t, set, rng, 80, `"}]`)
			if !r.CanEnd() {
				continue
			}
			finished++
			if _, err := r.Finish(); err != nil {
				t.Errorf("%s: output %q fails: %v", sc, out, err)
			}
		}
		if finished == 0 {
			t.Errorf("%s: no sample finished", sc)
		}
	}
}

// TestRegexMatcher checks token-by-token acceptance against Go's regexp
// and samples outputs under the mask.
func TestRegexMatcher(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		inputs  []string
	}{
		{`[a-c]+@(ex|example)\.com`, []string{"ab@example.com", "abc@ex.com", "ab@exa.com", "@example.com", "ba@example.comx"}},
		{`(?i)hello( world)?`, []string{"hello", "HeLLo world", "hello  world", "hell"}},
		{`\d{3}-\d{4}`, []string{"555-1111", "555-111", "5551-1111"}},
		{`é+x?`, []string{"é", "ééx", "\xc3", "x"}},
		{`(?m)^ab$\n^cd$`, []string{"ab\ncd", "ab\ncdx", "abcd"}},
	}
	for _, c := range cases {
		set := mustCompile(t, fake, Budget{}, tool(contracts.ToolRegexMatcher, map[string]any{"pattern": c.pattern}))
		re := regexp.MustCompile(`^(?:` + c.pattern + `)$`)
		for _, in := range c.inputs {
			ok, err := feed(set.NewRun(), set.vi, encodeGreedy(fake, in), true)
			if err != nil {
				t.Fatal(err)
			}
			if want := re.MatchString(in); ok != want {
				t.Errorf("%s on %q: got %v, want %v", c.pattern, in, ok, want)
			}
		}
		rng := rand.New(rand.NewSource(2))
		for i := 0; i < 40; i++ {
			out, r := generate(t, set, rng, 40, "")
			if r.CanEnd() {
				if !re.MatchString(out) {
					t.Errorf("%s: generated %q does not match", c.pattern, out)
				}
				if _, err := r.Finish(); err != nil {
					t.Errorf("%s: Finish(%q): %v", c.pattern, out, err)
				}
			}
		}
	}
}

func TestRegexCompleteStops(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "ab"}))
	r := set.NewRun()
	for _, id := range encodeGreedy(fake, "ab") {
		if err := r.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !r.Complete() {
		t.Fatal("pattern ab after ab: want Complete")
	}
	mask := make([]uint64, set.vi.Words)
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	if vocab.MaskCount(mask) != 1 || !vocab.MaskHas(mask, 0) {
		t.Fatalf("after a complete match only EOG may be allowed, got %d tokens", vocab.MaskCount(mask))
	}
}

// TestToxicityNeverProduced samples outputs biased towards the pieces of
// the banned words: no banned word appears, whatever tokens spell it.
func TestToxicityNeverProduced(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"block", "word"} {
		set := mustCompile(t, fake, Budget{}, tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"bad", "Abc"}, "mode": mode}))
		rng := rand.New(rand.NewSource(3))
		for i := 0; i < 200; i++ {
			out, _ := generate(t, set, rng, 40, "badBADc ")
			low := strings.ToLower(out)
			for _, w := range []string{"bad", "abc"} {
				if mode == "block" && strings.Contains(low, w) {
					t.Fatalf("block: %q contains %q", out, w)
				}
				if mode == "word" && regexp.MustCompile(`(^|[^a-z0-9_])`+w+`($|[^a-z0-9_])`).MatchString(low) {
					t.Fatalf("word: %q contains the word %q", out, w)
				}
			}
		}
	}
	// "b" then "ad" is masked; "Ba" then "D" too.
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"bad"}}))
	r := set.NewRun()
	mask := make([]uint64, set.vi.Words)
	r.Accept(fake.id("b"))
	r.Mask(mask)
	if vocab.MaskHas(mask, fake.id("ad")) || !vocab.MaskHas(mask, fake.id("ab")) {
		t.Error(`after "b", "ad" must be masked and "ab" allowed`)
	}
	r = set.NewRun()
	r.Accept(fake.id("Ba"))
	r.Mask(mask)
	if vocab.MaskHas(mask, fake.id("D")) || vocab.MaskHas(mask, fake.id("d")) {
		t.Error(`after "Ba", "D" and "d" must be masked`)
	}
	if !vocab.MaskHas(mask, 0) {
		t.Error("EOG must stay allowed")
	}
}

// TestToxicityWithLlama samples at random from the 32k vocabulary under the
// filter: the banned words never appear.
func TestToxicityWithLlama(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	words := []string{"the", "and"}
	set := mustCompile(t, tok, Budget{}, tool(contracts.ToolToxicityFilter, map[string]any{"words": words}))
	rng := rand.New(rand.NewSource(4))
	for i := 0; i < 20; i++ {
		out, _ := generate(t, set, rng, 60, "tTheaAnNdD")
		low := strings.ToLower(out)
		for _, w := range words {
			if strings.Contains(low, w) {
				t.Fatalf("%q contains %q", out, w)
			}
		}
	}
}

var piiText = "mail john.doe@example.com, card 4111 1111 1111 1111, phone +1 555-123-4567, " +
	"iban GB82 WEST 1234 5698 7654 32, id 11010519491231002X, ssn 123-45-6789 ok"

var piiSecrets = []string{"john.doe@example.com", "4111 1111 1111 1111", "555-123-4567", "GB82 WEST 1234 5698 7654 32", "11010519491231002X", "123-45-6789"}

func piiRedact(t testing.TB, set *Set, chunks []string) string {
	t.Helper()
	r := set.NewRun()
	var out strings.Builder
	for _, c := range chunks {
		s, err := r.Text(c)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(s)
	}
	tail, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	out.WriteString(tail)
	return out.String()
}

// TestPIISplitEverywhere streams the text cut at every pair of positions:
// the output is always the same and never holds a secret.
func TestPIISplitEverywhere(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolPIIRedactor, nil))
	want := piiRedact(t, set, []string{piiText})
	for _, s := range piiSecrets {
		if strings.Contains(want, s) {
			t.Fatalf("whole text: %q still holds %q", want, s)
		}
	}
	if !strings.Contains(want, "[EMAIL]") || !strings.Contains(want, "[CREDIT_CARD]") || !strings.Contains(want, "[IBAN]") ||
		!strings.Contains(want, "[CN_ID]") || !strings.Contains(want, "[US_SSN]") || !strings.Contains(want, "[PHONE]") {
		t.Fatalf("missing labels: %q", want)
	}
	n := len(piiText)
	step := 1
	if testing.Short() || timeSlack > 1 {
		step = 5
	}
	for i := 0; i <= n; i += step {
		for j := i; j <= n; j += step {
			got := piiRedact(t, set, []string{piiText[:i], piiText[i:j], piiText[j:]})
			if got != want {
				t.Fatalf("cut at %d,%d: %q, want %q", i, j, got, want)
			}
		}
	}
	// Byte by byte, checking what has been emitted at each step.
	r := set.NewRun()
	var emitted strings.Builder
	for i := 0; i < n; i++ {
		s, err := r.Text(piiText[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		emitted.WriteString(s)
		for _, sec := range piiSecrets {
			if strings.Contains(emitted.String(), sec[:len(sec)-1]) {
				t.Fatalf("after %d bytes, emitted %q holds most of %q", i+1, emitted.String(), sec)
			}
		}
	}
}

// TestPIIWithLlamaTokens streams the text as the llama tokenizer cuts it.
func TestPIIWithLlamaTokens(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	set := mustCompile(t, tok, Budget{}, tool(contracts.ToolPIIRedactor, nil))
	want := piiRedact(t, set, []string{piiText})
	var chunks []string
	for _, id := range tok.Encode(piiText, tokenizer.EncodeOptions{}) {
		chunks = append(chunks, string(tok.Piece(id)))
	}
	chunks[0] = strings.TrimPrefix(chunks[0], " ")
	if got := piiRedact(t, set, chunks); got != want {
		t.Fatalf("token stream: %q, want %q", got, want)
	}
}

func TestPIIChecksumsAndCustom(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolPIIRedactor, map[string]any{
		"entities": []string{"credit_card", "cn_id"}, "patterns": []string{`secret-\d+`}}))
	got := piiRedact(t, set, []string{"card 4111 1111 1111 1112 id 110105194912310021 code secret-42."})
	if want := "card 4111 1111 1111 1112 id 110105194912310021 code [REDACTED]."; got != want {
		t.Fatalf("got %q, want %q (bad checksums stay, custom pattern goes)", got, want)
	}
	if _, err := Compile([]contracts.Tool{tool(contracts.ToolPIIRedactor, map[string]any{"entities": []string{"dna"}})}, nil, fake, Budget{}); err == nil {
		t.Fatal("unknown entity compiled")
	}
}

// TestPIIFailsClosed: a custom pattern that keeps matching past the
// hold-back budget is redacted, never emitted.
func TestPIIFailsClosed(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{MaxHoldBack: 16}, tool(contracts.ToolPIIRedactor, map[string]any{"entities": []string{}, "patterns": []string{`k[a-z]*`}}))
	got := piiRedact(t, set, []string{"x k", strings.Repeat("a", 40), " y"})
	if strings.Contains(got, "aaaa") {
		t.Fatalf("held text leaked: %q", got)
	}
	// A step budget error emits nothing more.
	set = mustCompile(t, fake, Budget{MaxStepFuel: 50}, tool(contracts.ToolPIIRedactor, nil))
	r := set.NewRun()
	out, err := r.Text(strings.Repeat("john.doe@example.com ", 20))
	if err == nil || out != "" {
		t.Fatalf("fuel exhausted: got %q, %v", out, err)
	}
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.ToolCode != ToolStepBudget {
		t.Fatalf("want TOOL_STEP_BUDGET, got %v", err)
	}
}

// TestSuffixAlwaysLast: the suffix comes after held-back text, and the
// redactors see it like everything else the job emits: a match in the
// suffix, and one that runs from the output into the suffix, are redacted.
func TestSuffixAlwaysLast(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{},
		tool(contracts.ToolSuffix, map[string]any{"text": "\n-- sent by bot (john.doe@example.com)"}),
		tool(contracts.ToolPIIRedactor, nil))
	r := set.NewRun()
	out, _ := r.Text("write to john.doe@exam")
	tail, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out+tail, "write to john.doe@exam\n-- sent by bot ([EMAIL])"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	rep := r.Report()
	if rep[0].Tool != "suffix" || rep[0].Actions != 1 || rep[1].Tool != "pii_redactor" || rep[1].Actions != 1 {
		t.Fatalf("report %+v", rep)
	}
	// A match that starts in the output and ends in the suffix.
	set = mustCompile(t, fake, Budget{},
		tool(contracts.ToolSuffix, map[string]any{"text": "ple.com -- bot"}),
		tool(contracts.ToolPIIRedactor, nil))
	r = set.NewRun()
	out, _ = r.Text("mail john.doe@exam")
	tail, err = r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out+tail, "mail [EMAIL] -- bot"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestRetryOnFail(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolRetryOnFail, map[string]any{"output_contains": []string{"I cannot"}, "max_retries": 2}))
	r := set.NewRun()
	if r.Retry("fine") {
		t.Fatal("no marker: no retry")
	}
	if !r.Retry("I cannot do that") || !r.Retry("I cannot") {
		t.Fatal("two retries expected")
	}
	r.Reset()
	if r.Retry("I cannot") {
		t.Fatal("retries exhausted")
	}
	if _, err := r.Finish(); err == nil {
		t.Fatal("strict retry_on_fail: still matching after the retries must fail")
	}
	ev := r.Events()
	if len(ev) < 2 || ev[0].Action != contracts.ToolActionRetried {
		t.Fatalf("events %+v", ev)
	}
	if rep := r.Report(); rep[0].Actions != 2 || rep[0].Status != contracts.ToolStatusFailed {
		t.Fatalf("report %+v", rep)
	}
}

func TestXMLValidator(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolXMLValidator, map[string]any{"allowed_tags": []string{"b", "i"}}))
	for in, want := range map[string]bool{
		"<b>hello <i>world</i></b>":  true,
		"a &amp; b &#38; <b x='1'/>": true,
		"<b>hello</i>":               false,
		"<u>x</u>":                   false,
		"<b>open":                    false,
		"a & b":                      false,
	} {
		ok, err := feed(set.NewRun(), set.vi, encodeGreedy(fake, in), true)
		if err != nil {
			t.Fatal(err)
		}
		if ok != want {
			t.Errorf("%q: got %v, want %v", in, ok, want)
		}
	}
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 50; i++ {
		out, r := generate(t, set, rng, 40, "<>/")
		if r.CanEnd() {
			if msg := xmlCheck(set.tools[0].xml, []byte(out)); msg != "" {
				t.Fatalf("%q: %s", out, msg)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tool     contracts.Tool
		code     contracts.Code
		toolCode contracts.ToolCode
		inMsg    string
	}{
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"not": map[string]any{"pattern": "^x"}}}}}),
			contracts.CodeInvalidSchema, ToolCompileFailed, `"not" at /properties/a`},
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"enum": []any{}}}, "required": []string{"a"}}}),
			contracts.CodeInvalidSchema, ToolCompileFailed, `keyword "enum" at /properties/a: enum is empty`},
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": false}),
			contracts.CodeInvalidSchema, ToolCompileFailed, `at /: no value satisfies the schema`},
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"a": false}, "required": []string{"a"}}}),
			contracts.CodeInvalidSchema, ToolCompileFailed, `at /: no value satisfies the schema`},
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{"$ref": "http://example.com/x.json"}}),
			contracts.CodeInvalidSchema, ToolCompileFailed, "external reference"},
		{tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "(?=a)b"}), contracts.CodeInvalidRegex, ToolCompileFailed, "Perl syntax"},
		{tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "a\\bb"}), contracts.CodeInvalidRegex, ToolCompileFailed, "word-boundary"},
		{tool(contracts.ToolRegexMatcher, map[string]any{"pattern": strings.Repeat("x{1000}", 60)}), contracts.CodeInvalidRegex, ToolCompileFailed, "too large"},
		{tool(contracts.ToolRegexMatcher, nil), contracts.CodeInvalidRequest, ToolCompileFailed, "needs param pattern"},
		{contracts.Tool{Name: "summarize"}, contracts.CodeUnknownTool, ToolCompileFailed, "not an inline tool"},
		{tool(contracts.ToolXMLValidator, map[string]any{"allowed_tags": []string{"1b"}}), contracts.CodeInvalidRequest, ToolCompileFailed, "XML name"},
		{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"x"}, "mode": "shout"}), contracts.CodeInvalidRequest, ToolCompileFailed, "mode"},
		{tool(contracts.ToolPIIRedactor, map[string]any{"patterns": []string{"(?<!x)y"}}), contracts.CodeInvalidRegex, ToolCompileFailed, "invalid named capture"},
		{tool(contracts.ToolSuffix, map[string]any{"text": "!", "foo": 1}), contracts.CodeInvalidRequest, ToolCompileFailed, "has no param foo"},
	}
	for _, c := range cases {
		_, err := Compile([]contracts.Tool{c.tool}, nil, fake, Budget{})
		var ce *contracts.Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: want *contracts.Error, got %v", c.tool.Name, err)
			continue
		}
		if ce.Code != c.code || ce.ToolCode != c.toolCode || !strings.Contains(ce.Message, c.inMsg) || ce.Tool != string(c.tool.Name) {
			t.Errorf("%s: got %+v, want code %s/%s with %q", c.tool.Name, ce, c.code, c.toolCode, c.inMsg)
		}
	}
}

// TestCompileErrorFields: a bad parameter is reported at its own path:
// an unknown parameter by name, a bad toxicity mode at params.mode (not
// params.words).
func TestCompileErrorFields(t *testing.T) {
	t.Parallel()
	ok := tool(contracts.ToolSuffix, map[string]any{"text": "!"})
	cases := []struct {
		tool  contracts.Tool
		field string
	}{
		{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"x"}, "mode": "shout"}), "tools[1].params.mode"},
		{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"x"}, "mode": 3}), "tools[1].params.mode"},
		{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"x"}, "foo": true}), "tools[1].params.foo"},
		{tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "a", "flags": "i"}), "tools[1].params.flags"},
		{tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{}, "Schema": map[string]any{}}), "tools[1].params.Schema"},
	}
	for _, c := range cases {
		_, err := Compile([]contracts.Tool{ok, c.tool}, nil, fake, Budget{})
		var ce *contracts.Error
		if !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidRequest || ce.Field != c.field || ce.Tool != string(c.tool.Name) {
			t.Errorf("%s %s: got %v (%+v), want invalid_request at %s", c.tool.Name, c.tool.Params, err, ce, c.field)
		}
	}
	// Aliases of the modes stay accepted.
	mustCompile(t, fake, Budget{}, tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"x"}, "mode": "Whole_Word"}))
}

// TestTruncate: a run stopped at a budget inside a constraint is
// incomplete, not failed: Finish skips the constraint's validation, the
// report says incomplete, and the suffix still comes last. A constraint
// that could end is validated as usual.
func TestTruncate(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{},
		tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "(ab)+c"}),
		tool(contracts.ToolSuffix, map[string]any{"text": " END"}))
	r := set.NewRun()
	for _, id := range encodeGreedy(fake, "abab") {
		if err := r.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	why := r.Truncate("max_tokens")
	if !strings.Contains(why, "regex_matcher (tools[0])") || !strings.Contains(why, "max_tokens") {
		t.Fatalf("Truncate = %q", why)
	}
	tail, err := r.Finish()
	if err != nil || tail != " END" {
		t.Fatalf("Finish = %q, %v; want the suffix and no error", tail, err)
	}
	rep := r.Report()
	if rep[0].Status != contracts.ToolStatusOK || !strings.Contains(rep[0].Detail, "incomplete") {
		t.Fatalf("report %+v", rep[0])
	}
	// After a Reset the next attempt is validated again.
	r.Reset()
	if rep := r.Report(); strings.Contains(rep[0].Detail, "incomplete") {
		t.Fatalf("report after Reset %+v", rep[0])
	}
	// Nothing incomplete: a budget stop where the constraint could end.
	r = set.NewRun()
	for _, id := range encodeGreedy(fake, "ababc") {
		if err := r.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if why := r.Truncate("max_tokens"); why != "" {
		t.Fatalf("Truncate = %q, want \"\"", why)
	}
	if _, err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestSoftMode: an unsupported keyword is a compile error in strict mode
// and a reported soft constraint in soft mode.
func TestSoftMode(t *testing.T) {
	t.Parallel()
	schema := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"not": map[string]any{"multipleOf": 2}}}, "required": []string{"a"}}
	strict := tool(contracts.ToolJSONValidator, map[string]any{"schema": schema})
	if _, err := Compile([]contracts.Tool{strict}, nil, fake, Budget{}); err == nil || !strings.Contains(err.Error(), `"not" at /properties/b`) {
		t.Fatalf("strict: %v", err)
	}
	soft := strict
	soft.Mode = contracts.ToolModeSoft
	set := mustCompile(t, fake, Budget{}, soft)
	r := set.NewRun()
	ok, err := feed(r, set.vi, encodeGreedy(fake, `{"a":12,"b":12}`), true)
	if err != nil || !ok {
		t.Fatalf("soft: %v %v", ok, err)
	}
	if _, err := r.Finish(); err != nil {
		t.Fatalf("soft finish: %v", err)
	}
	rep := r.Report()
	if rep[0].Status != contracts.ToolStatusViolated || !strings.Contains(rep[0].Detail, "constraint: soft") {
		t.Fatalf("report %+v", rep)
	}
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	schema := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "pattern": "^[a-z]+$"}}
	set := mustCompile(t, fake, Budget{MaxStepFuel: 100}, tool(contracts.ToolJSONValidator, map[string]any{"schema": schema}))
	r := set.NewRun()
	r.Accept(fake.id(`{"`))
	_, err := r.Mask(make([]uint64, set.vi.Words))
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.Code != contracts.CodeToolExecutionFailed || ce.ToolCode != ToolStepBudget || ce.Tool != "json_validator" {
		t.Fatalf("fuel: got %v", err)
	}
	if err2 := r.Accept(fake.id("a")); err2 != err {
		t.Fatal("a failed run keeps failing with the same error")
	}
	if len(r.DropFailed()) != 1 || r.Report()[0].Status != contracts.ToolStatusDropped {
		t.Fatal("DropFailed")
	}
	_, err = Compile([]contracts.Tool{tool(contracts.ToolJSONValidator, map[string]any{"schema": schema})}, nil, fake, Budget{MaxMemoryBytes: 1000})
	if !errors.As(err, &ce) || ce.ToolCode != contracts.ToolMemoryExhausted {
		t.Fatalf("memory: got %v", err)
	}
}

func TestUnconstrained(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolSuffix, map[string]any{"text": "!"}))
	r := set.NewRun()
	mask := []uint64{42}
	if c, err := r.Mask(mask); c || err != nil || mask[0] != 42 {
		t.Fatal("no masking tool: Mask must report false and leave the mask alone")
	}
	if s, _ := r.Text("hi"); s != "hi" {
		t.Fatal("no text tool: Text passes through")
	}
	if tail, _ := r.Finish(); tail != "!" {
		t.Fatalf("tail %q", tail)
	}
	if r.TimeMs() < 0 {
		t.Fatal("time")
	}
}

// TestMemoryBytes: a run reports the memory its tools hold, and it grows
// as a regex's lazy DFA and mask cache fill in.
func TestMemoryBytes(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, fake, Budget{}, tool(contracts.ToolRegexMatcher, map[string]any{"pattern": "(ab|cd)*e[0-9]{3,9}"}))
	r := set.NewRun()
	own := func(r *Run) int64 { return int64(8*cap(r.tmp) + cap(r.raw) + cap(r.text)) }
	compiled := r.MemoryBytes() - own(r)
	if compiled <= 0 || own(r) < int64(8*set.vi.Words) {
		t.Fatalf("a fresh run reports %d bytes of compiled tools and %d of its own", compiled, own(r))
	}
	mask := make([]uint64, set.vi.Words)
	for _, s := range []string{"ab", "c", "d", "e", "1", "2", "3"} {
		if _, err := r.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if err := r.Accept(fake.id(s)); err != nil {
			t.Fatal(err)
		}
	}
	grown := r.MemoryBytes() - own(r)
	if grown <= compiled {
		t.Fatalf("compiled tools hold %d bytes after decoding through the DFA, %d before: the states it built are not counted", grown, compiled)
	}
	if r2 := set.NewRun(); r2.MemoryBytes()-own(r2) != grown {
		t.Fatal("the compiled tool's memory is shared by every run of the set")
	}
}

// TestCompileCache: the same schema compiles once per vocabulary.
func TestCompileCache(t *testing.T) {
	t.Parallel()
	sc := tool(contracts.ToolJSONValidator, map[string]any{"schema": map[string]any{"type": "string", "maxLength": 12345}})
	mustCompile(t, fake, Budget{}, sc)
	s2 := mustCompile(t, fake, Budget{}, sc)
	if s2.CacheHits() != 1 {
		t.Fatalf("second compile: %d cache hits", s2.CacheHits())
	}
	if m := ReadMetrics(); m.CacheHits < 1 || m.CacheMisses < 1 {
		t.Fatalf("metrics %+v", m)
	}
}
