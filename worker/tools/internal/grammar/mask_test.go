package grammar_test

import (
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools/internal/grammar"
	"github.com/zerolayer/zerolayer/worker/tools/internal/limit"
	"github.com/zerolayer/zerolayer/worker/tools/internal/schema"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// TestMaskMatchesAccept: at every step of an instance, the mask (trie
// walks, leaf caches, exit shapes, alive-byte records, whole subtrees)
// allows exactly the tokens that Accept, stepping their bytes one by one,
// lets through. Llama 32k vocabulary; skipped without ../shared.
func TestMaskMatchesAccept(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	vi := vocab.IndexOf(tok)
	cases := []struct {
		schema, doc string
		layout      grammar.Layout
	}{
		{`{"type":"object"}`, `{"a":"x y","bb":[1,-2.5e3,true,null],"c":{"d":"é"}}`, grammar.Layout{}},
		{`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name"],"additionalProperties":false}`,
			`{"name":"John \"Q\" Doe","age":42}`, grammar.Layout{}},
		{`{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"mail":{"type":"string","format":"email"},"code":{"type":"string","pattern":"^[A-Z]{2}[0-9]+$"}}}`,
			`{"id":"123e4567-e89b-12d3-a456-426614174000","mail":"john.doe@example.com","code":"AB1234"}`, grammar.Layout{}},
		{`{"type":"array","items":{"type":"string","maxLength":12}}`, `["alpha","beta gamma","\\n\u00e9"]`, grammar.Layout{}},
		{`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.5}}}`, "{\n  \"n\": 12.5\n}", grammar.Layout{MaxSpace: grammar.PrettySpace}},
		{`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`, `{"tags":["a","bcd"],"oth":"zz"}`, grammar.Layout{MaxStringLen: 4}},
		// A pattern under a maxLength it could outrun (lenRoom).
		{`{"type":"object","properties":{"f":{"type":"string","pattern":"^[a-z ]+\\.[a-z]+$","maxLength":9},"g":{"type":"string","format":"date","maxLength":10}}}`,
			`{"f":"ab cd.ef","g":"2024-01-02"}`, grammar.Layout{}},
		// The keywords whose state is per value (uniqueItems keeps the
		// items; if, not and oneOf fork alternatives).
		{`{"type":"array","items":{"type":"string"},"uniqueItems":true}`, `["a","ab","b","a b","é"]`, grammar.Layout{}},
		{`{"type":"array","items":{"type":"integer","minimum":0,"maximum":500},"uniqueItems":true}`, `[1,12,120,2,21]`, grammar.Layout{}},
		{`{"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{"type":"integer"},"y":{"type":"string"}},"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]},"else":{"required":["y"]}}`,
			`{"kind":"a","x":3}`, grammar.Layout{}},
		{`{"oneOf":[{"type":"object","properties":{"intent":{"type":"string"}},"required":["intent"]},{"type":"object","properties":{"fallback_reason":{"type":"string"}},"required":["fallback_reason"]}]}`,
			`{"intent":"buy"}`, grammar.Layout{}},
		// Bounded numbers on the rational path: past a prefix whose every
		// completion is in bounds, the frame stops checking (and stops
		// keeping its text, except for uniqueItems).
		{`{"type":"object","properties":{"x":{"type":"number","minimum":0},"y":{"type":"number","exclusiveMinimum":-1.5,"maximum":2.25},"z":{"type":"array","items":{"type":"number","maximum":-0.5},"uniqueItems":true}}}`,
			`{"x":12.75,"y":-1.25,"z":[-3,-0.75,-10.5,-0.751]}`, grammar.Layout{}},
		// String nodes with one pattern or format share leaf entries when
		// their clamped bounds agree (a, e), not when they differ (c, d);
		// email is also in an earlier schema, compiled before this one.
		{`{"type":"object","properties":{"a":{"type":"string","format":"date"},"c":{"type":"string","pattern":"^[a-z]+$","minLength":3},"d":{"type":"string","pattern":"^[a-z]+$","maxLength":2},"e":{"type":"string","format":"date"},"m":{"type":"string","format":"email"},"n":{"type":"array","items":{"type":"string","format":"email","maxLength":9}}}}`,
			`{"a":"2024-01-02","c":"abcd","d":"xy","e":"1999-12-31","m":"a.b@example.org","n":["x@y.io","ab@cd.ef"]}`, grammar.Layout{}},
		// Keys: an open object's key leaves are shared whatever properties
		// were seen; a closed object's depend on them.
		{`{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"string"},"abc":{"type":"object","properties":{"x":{},"xy":{},"xyz":{}},"additionalProperties":false}},"required":["a"]}`,
			`{"ab":"x","a":1,"abd":2,"abc":{"xy":1,"x":2,"xyz":3}}`, grammar.Layout{}},
		// Bounded additional keys: off the known-key trie, a key's plain
		// text counts against propertyNames maxLength.
		{`{"type":"object","properties":{"ab":{}},"propertyNames":{"maxLength":5}}`,
			`{"abcde":1,"xy":"key","ab":{"name":"value"}}`, grammar.Layout{}},
	}
	lim := schema.Limits{MaxSchemaNodes: 10000, MaxPatternBytes: 4096, MaxRegexInsts: 20000, MaxDFAStates: 10000,
		MaxMemoryBytes: 256 << 20, MaxThreads: 64}
	for _, c := range cases {
		lim.Layout = c.layout
		m, _, _, err := schema.Compile([]byte(c.schema), false, vi, lim, limit.NewClock(10*time.Second))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		r := grammar.NewRun(m)
		mask := make([]uint64, vi.Words)
		ids := tok.Encode(c.doc, tokenizer.EncodeOptions{})
		for step := 0; step <= len(ids); step++ {
			if _, err := r.Mask(mask, limit.NewFuel(1<<40)); err != nil {
				t.Fatal(err)
			}
			for id := int32(0); int(id) < vi.Size; id++ {
				p := vi.Pieces[id]
				if p == nil {
					continue
				}
				ok, err := r.Clone().Accept(p, limit.NewFuel(1<<40))
				if err != nil {
					t.Fatal(err)
				}
				if ok != vocab.MaskHas(mask, id) {
					t.Fatalf("%s after %d tokens of %q: token %q masked %v, accepted %v",
						c.schema, step, c.doc, p, vocab.MaskHas(mask, id), ok)
				}
			}
			if step == len(ids) {
				break
			}
			if ok, err := r.Accept(vi.Pieces[ids[step]], limit.NewFuel(1<<40)); err != nil || !ok {
				t.Fatalf("%s: token %d (%q) of %q refused (%v)", c.schema, step, vi.Pieces[ids[step]], c.doc, err)
			}
		}
		if !r.CanEnd() {
			t.Errorf("%s: %q cannot end", c.schema, c.doc)
		}
	}
}
