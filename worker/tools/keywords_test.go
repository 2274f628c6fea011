package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// byteIDs spells s in fake's single-byte tokens (byte b is token b+1).
func byteIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i]) + 1
	}
	return ids
}

// jsonSet compiles schema (JSON text) as a strict json_validator over fake.
func jsonSet(t *testing.T, schema string) *Set {
	t.Helper()
	set, err := Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator, Params: map[string]json.RawMessage{"schema": json.RawMessage(schema)}}}, nil, fake, Budget{})
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return set
}

// allows reports whether, after prefix, the mask allows the byte next.
func allows(t *testing.T, set *Set, prefix string, next byte) bool {
	t.Helper()
	r := set.NewRun()
	for _, id := range byteIDs(prefix) {
		if err := r.Accept(id); err != nil {
			t.Fatalf("prefix %q refused at token %d: %v", prefix, id, err)
		}
	}
	mask := make([]uint64, set.vi.Words)
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	return vocab.MaskHas(mask, int32(next)+1)
}

// keywordCase is an instance of a schema: whether the mask lets it through
// (every byte allowed, then the end), and whether the final validation
// then accepts it.
type keywordCase struct {
	schema string
	inst   string
	mask   bool
	final  bool
}

func runKeywordCases(t *testing.T, cases []keywordCase) {
	t.Helper()
	sets := map[string]*Set{}
	for _, c := range cases {
		set := sets[c.schema]
		if set == nil {
			set = jsonSet(t, c.schema)
			sets[c.schema] = set
		}
		ok, err := feed(set.NewRun(), set.vi, byteIDs(c.inst), true)
		if err != nil {
			t.Fatalf("%s / %s: %v", c.schema, c.inst, err)
		}
		if ok != c.mask {
			t.Errorf("%s / %s: mask lets it through = %v, want %v", c.schema, c.inst, ok, c.mask)
			continue
		}
		if ok {
			if got := finalValid(set, c.inst); got != c.final {
				t.Errorf("%s / %s: final validation = %v, want %v", c.schema, c.inst, got, c.final)
			}
		}
	}
}

// notesOf returns what the JSON tool of set leaves to the final validation.
func notesOf(set *Set) string { return strings.Join(set.tools[0].notes, "; ") }

// TestUniqueItemsInTheMask: an item equal to an earlier scalar item cannot
// be completed (strings by their decoded value, numbers by their value);
// object items are compared by the final validation, and the tool says so.
func TestUniqueItemsInTheMask(t *testing.T) {
	t.Parallel()
	strs := `{"type":"array","items":{"type":"string"},"uniqueItems":true}`
	set := jsonSet(t, strs)
	if notes := notesOf(set); notes != "" {
		t.Errorf("strings: notes %q, want none (exact)", notes)
	}
	if allows(t, set, `["ab","ab`, '"') {
		t.Error(`["ab","ab: the closing quote of a duplicate is allowed`)
	}
	for _, next := range []byte{'c', 'a'} {
		if !allows(t, set, `["ab","ab`, next) {
			t.Errorf(`["ab","ab: %q (a longer, distinct item) is refused`, next)
		}
	}
	if !allows(t, set, `["ab","a`, '"') {
		t.Error(`["ab","a: the closing quote of a distinct item is refused`)
	}
	nums := `{"type":"array","items":{"type":"number"},"uniqueItems":true}`
	if allows(t, jsonSet(t, nums), `[1,1.0`, ',') || allows(t, jsonSet(t, nums), `[10,1e1`, ']') {
		t.Error("a number equal to an earlier one can end")
	}
	runKeywordCases(t, []keywordCase{
		{strs, `["ab","ba","a"]`, true, true},
		{strs, `["ab","ba","ab"]`, false, false},
		{strs, `["a","\u0061"]`, false, false},
		{strs, `["a\n","a\u000a"]`, false, false},
		{strs, `["é","\u00e9"]`, false, false},
		{strs, `["é","e"]`, true, true},
		{nums, `[1,2,10,-1,0.5]`, true, true},
		{nums, `[1,2,1.0]`, false, false},
		{nums, `[0,-0]`, false, false},
		{`{"type":"array","items":{"type":["string","null","integer"]},"uniqueItems":true}`, `[null,"x",1,"y"]`, true, true},
		{`{"type":"array","items":{"type":["string","null","integer"]},"uniqueItems":true}`, `[null,"x",null]`, false, false},
		{`{"type":"array","items":{"type":["string","boolean"]},"uniqueItems":true}`, `[true,"true",false]`, true, true},
		{`{"type":"array","items":{"type":["string","boolean"]},"uniqueItems":true}`, `[true,"a",true]`, false, false},
		{`{"type":"array","prefixItems":[{"const":"a"}],"items":{"type":"string"},"uniqueItems":true}`, `["a","a"]`, false, false},
		{`{"type":"array","prefixItems":[{"const":"a"}],"items":{"type":"string"},"uniqueItems":true}`, `["a","b"]`, true, true},
		// Objects: the final validation.
		{`{"type":"array","items":{"type":"object"},"uniqueItems":true}`, `[{"a":1},{"a":2}]`, true, true},
		{`{"type":"array","items":{"type":"object"},"uniqueItems":true}`, `[{"a":1},{"a":1}]`, true, false},
	})
	// Multi-byte tokens that close the string ("] and ",") are checked
	// with the text before their quote.
	set = jsonSet(t, strs)
	r := set.NewRun()
	for _, id := range byteIDs(`["ab","a`) {
		if err := r.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	mask := make([]uint64, set.vi.Words)
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	for piece, want := range map[string]bool{`b`: true, `bad`: true, `ba`: true, `"]`: true, `","`: true} {
		id := fake.id(piece)
		if got := vocab.MaskHas(mask, id); got != want {
			t.Errorf(`["ab","a then %q: allowed %v, want %v`, piece, got, want)
		}
	}
	for _, id := range byteIDs(`b`) {
		if err := r.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Mask(mask); err != nil {
		t.Fatal(err)
	}
	for _, piece := range []string{`"]`, `","`, `"`} {
		if vocab.MaskHas(mask, fake.id(piece)) {
			t.Errorf(`["ab","ab then %q (closing the duplicate) is allowed`, piece)
		}
	}
	for inst, want := range map[string]bool{`["ab","ab"]`: false, `["ab","abc"]`: true, `["abc","ab"]`: true, `["abc","abc"]`: false, `["name","name"]`: false} {
		ids := encodeGreedy(fake, inst)
		if ok, _ := feed(set.NewRun(), set.vi, ids, true); ok != want {
			t.Errorf("%s in fake's longest tokens (%d tokens): accepted %v, want %v", inst, len(ids), ok, want)
		}
	}
	objs := jsonSet(t, `{"type":"array","items":{"type":"object"},"uniqueItems":true}`)
	if notes := notesOf(objs); !strings.Contains(notes, "uniqueItems at / (checked after generation") {
		t.Errorf("object items: notes %q", notes)
	}
	r = objs.NewRun()
	if ok, _ := feed(r, objs.vi, byteIDs(`[{"a":1},{"a":1}]`), true); !ok {
		t.Fatal("object duplicate refused by the mask")
	}
	if _, err := r.Finish(); err == nil || !strings.Contains(err.Error(), "TOOL_VALIDATION_FAILED") {
		t.Errorf("object duplicate: Finish = %v, want a validation failure", err)
	}
	r = objs.NewRun()
	if ok, _ := feed(r, objs.vi, byteIDs(`[{"a":1},{"a":2}]`), true); !ok {
		t.Fatal("distinct objects refused by the mask")
	}
	if _, err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if rep := r.Report(); !strings.Contains(rep[0].Detail, "checked after generation") {
		t.Errorf("report detail %q does not say what is checked after generation", rep[0].Detail)
	}
}

// TestIfThenElseInTheMask: the branch follows the property the if
// examines, whether it comes before or after the others.
func TestIfThenElseInTheMask(t *testing.T) {
	t.Parallel()
	s := `{"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{"type":"string"},"y":{"type":"integer"}},
		"if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},"then":{"required":["x"]},"else":{"required":["y"]}}`
	set := jsonSet(t, s)
	if notes := notesOf(set); notes != "" {
		t.Errorf("notes %q, want none (exact)", notes)
	}
	if allows(t, set, `{"kind":"a"`, '}') {
		t.Error(`{"kind":"a" may close without x`)
	}
	if !allows(t, set, `{"kind":"a","x":"s"`, '}') {
		t.Error(`{"kind":"a","x":"s" may not close`)
	}
	if allows(t, set, `{"x":"s","kind":"b"`, '}') {
		t.Error(`{"x":"s","kind":"b" may close without y`)
	}
	runKeywordCases(t, []keywordCase{
		{s, `{"kind":"a","x":"s"}`, true, true},
		{s, `{"x":"s","kind":"a"}`, true, true},
		{s, `{"kind":"a","y":1}`, false, false},
		{s, `{"kind":"b","y":1}`, true, true},
		{s, `{"y":1,"kind":"b","x":"s"}`, true, true},
		{s, `{"kind":"b","x":"s"}`, false, false},
		{s, `{"y":2}`, true, true},
		{s, `{"x":"s"}`, false, false},
		// then: false / else: false.
		{`{"if":{"const":1},"then":false}`, `1`, false, false},
		{`{"if":{"const":1},"then":false}`, `2`, true, true},
		{`{"if":{"type":"string"},"else":false}`, `"s"`, true, true},
		{`{"if":{"type":"string"},"else":false}`, `2`, false, false},
		// Bounds negate exactly; a bound says nothing of other types.
		{`{"if":{"minimum":5},"then":false}`, `"s"`, false, false},
		{`{"if":{"minimum":5},"then":false}`, `4`, true, true},
		{`{"if":{"minimum":5},"then":{"multipleOf":2}}`, `6`, true, true},
		{`{"if":{"minimum":5},"then":{"multipleOf":2}}`, `7`, false, false},
		{`{"if":{"minimum":5},"then":{"multipleOf":2}}`, `3`, true, true},
		{`{"if":{"maxLength":2},"then":{"pattern":"^a"},"else":{"pattern":"^b"}}`, `"ax"`, true, true},
		{`{"if":{"maxLength":2},"then":{"pattern":"^a"},"else":{"pattern":"^b"}}`, `"bx"`, false, false},
		{`{"if":{"maxLength":2},"then":{"pattern":"^a"},"else":{"pattern":"^b"}}`, `"bxx"`, true, true},
		// A condition without an exact negation: checked at the end.
		{`{"if":{"pattern":"^a"},"then":{"maxLength":2}}`, `"ab"`, true, true},
		{`{"if":{"pattern":"^a"},"then":{"maxLength":2}}`, `"abc"`, true, false},
		{`{"if":{"pattern":"^a"},"then":{"maxLength":2}}`, `"bcd"`, true, true},
	})
	late := jsonSet(t, `{"if":{"pattern":"^a"},"then":{"maxLength":2}}`)
	if notes := notesOf(late); !strings.Contains(notes, "if at / (checked after generation") {
		t.Errorf("late if: notes %q", notes)
	}
}

// TestDependentSchemasInTheMask: a present property brings its schema
// along, exactly, in both drafts' spellings.
func TestDependentSchemasInTheMask(t *testing.T) {
	t.Parallel()
	s := `{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"dependentSchemas":{"a":{"required":["b"],"properties":{"b":{"maxLength":2}}}}}`
	d7 := `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"type":"integer"}},"dependencies":{"a":{"required":["b"]},"c":["a"]}}`
	runKeywordCases(t, []keywordCase{
		{s, `{"a":1,"b":"xy"}`, true, true},
		{s, `{"b":"xyz","a":1}`, false, false},
		{s, `{"a":1}`, false, false},
		{s, `{"b":"xyz"}`, true, true},
		{s, `{}`, true, true},
		{d7, `{"a":1,"b":null}`, true, true},
		{d7, `{"a":1}`, false, false},
		{d7, `{"c":1,"a":1,"b":2}`, true, true},
		{d7, `{"c":1}`, false, false},
		{`{"dependentSchemas":{"a":false}}`, `{"a":1}`, false, false},
		{`{"dependentSchemas":{"a":false}}`, `{"b":1}`, true, true},
	})
	if notes := notesOf(jsonSet(t, s)); notes != "" {
		t.Errorf("notes %q, want none (exact)", notes)
	}
}

// TestOneOfExclusivity: branches told apart by a const discriminator are
// exact in the mask; overlapping branches that negate are compiled as
// "this branch and not the others", exact too; others compile as anyOf
// and the final validation refuses a value two branches accept.
func TestOneOfExclusivity(t *testing.T) {
	t.Parallel()
	disc := `{"type":"object","oneOf":[{"properties":{"k":{"const":"a"},"x":{"type":"string"}},"required":["k","x"]},{"properties":{"k":{"const":"b"},"y":{"type":"number"}},"required":["k","y"]}]}`
	overlap := `{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`
	late := `{"type":"string","oneOf":[{"pattern":"^a"},{"maxLength":2}]}`
	for _, s := range []string{disc, overlap} {
		if notes := notesOf(jsonSet(t, s)); notes != "" {
			t.Errorf("%s: notes %q, want none", s, notes)
		}
	}
	if notes := notesOf(jsonSet(t, late)); !strings.Contains(notes, "oneOf at / (checked after generation") {
		t.Errorf("overlapping oneOf with a pattern: notes %q", notes)
	}
	if allows(t, jsonSet(t, overlap), `{"a":1,"b`, '"') || !allows(t, jsonSet(t, overlap), `{"a":1,"c`, '"') {
		t.Error(`{"a":1, then key b may be written, or key c may not`)
	}
	runKeywordCases(t, []keywordCase{
		{disc, `{"k":"a","x":"s"}`, true, true},
		{disc, `{"k":"b","y":1}`, true, true},
		{disc, `{"k":"a","y":1}`, false, false},
		{overlap, `{"a":1}`, true, true},
		{overlap, `{"b":1,"c":2}`, true, true},
		{overlap, `{"c":1}`, false, false},
		{overlap, `{"a":1,"b":2}`, false, false},
		// Not integer is wider than its negation: checked at the end.
		{`{"oneOf":[{"type":"integer"},{"maximum":2}]}`, `"s"`, true, true},
		{`{"oneOf":[{"type":"integer"},{"maximum":2}]}`, `5`, true, true},
		{`{"oneOf":[{"type":"integer"},{"maximum":2}]}`, `1.5`, true, true},
		{`{"oneOf":[{"type":"integer"},{"maximum":2}]}`, `2`, true, false},
		{`{"oneOf":[{"type":"integer"},{"maximum":2}]}`, `2.5`, false, false},
		{`{"oneOf":[{"type":"string"},{"maxLength":2}]}`, `"s"`, false, false},
		{`{"oneOf":[{"type":"string"},{"maxLength":2}]}`, `"sss"`, true, true},
		{`{"oneOf":[{"type":"string"},{"maxLength":2}]}`, `1`, true, true},
		{late, `"abc"`, true, true},
		{late, `"x"`, true, true},
		{late, `"ab"`, true, false},
		{late, `"xyz"`, false, false},
	})
}

// TestNotForms: not with type, enum, const and required is exact in the
// mask.
func TestNotForms(t *testing.T) {
	t.Parallel()
	notEnum := `{"type":"string","not":{"enum":["ab","b"]}}`
	set := jsonSet(t, notEnum)
	if allows(t, set, `"ab`, '"') || !allows(t, set, `"ab`, 'c') || !allows(t, set, `"a`, '"') {
		t.Error(`not enum: "ab" may end, or "abc" / "a" may not`)
	}
	runKeywordCases(t, []keywordCase{
		{`{"not":{"type":"string"}}`, `"x"`, false, false},
		{`{"not":{"type":"string"}}`, `1`, true, true},
		{`{"not":{"type":["object","array","null"]}}`, `{}`, false, false},
		{`{"not":{"type":["object","array","null"]}}`, `true`, true, true},
		{notEnum, `"ab"`, false, false},
		{notEnum, `"b"`, false, false},
		{notEnum, `"a"`, true, true},
		{notEnum, `"abc"`, true, true},
		{notEnum, `""`, true, true},
		{`{"not":{"const":null}}`, `null`, false, false},
		{`{"not":{"const":null}}`, `false`, true, true},
		{`{"enum":["a","b","c"],"not":{"const":"b"}}`, `"b"`, false, false},
		{`{"enum":["a","b","c"],"not":{"const":"b"}}`, `"c"`, true, true},
		{`{"not":{"required":["a"]}}`, `1`, false, false},
		{`{"not":{"required":["a"]}}`, `{"b":1}`, true, true},
		{`{"type":"object","not":{"required":["a","b"]}}`, `{"a":1,"b":2}`, false, false},
		{`{"type":"object","not":{"required":["a","b"]}}`, `{"b":2,"c":3}`, true, true},
		{`{"type":"object","not":{"properties":{"k":{"const":"x"}},"required":["k"]}}`, `{"k":"x"}`, false, false},
		{`{"type":"object","not":{"properties":{"k":{"const":"x"}},"required":["k"]}}`, `{"k":"y"}`, true, true},
		{`{"type":"object","not":{"properties":{"k":{"const":"x"}},"required":["k"]}}`, `{}`, true, true},
		{`{"not":{"not":{"type":"integer"}}}`, `1`, true, true},
		{`{"not":{"not":{"type":"integer"}}}`, `"1"`, false, false},
		{`{"not":{"anyOf":[{"type":"string"},{"type":"number"}]}}`, `"s"`, false, false},
		{`{"not":{"anyOf":[{"type":"string"},{"type":"number"}]}}`, `[]`, true, true},
	})
}

// TestLogicAlternativesCapped: past 64 alternatives in one schema, the
// further dependent schemas are checked after generation (and said so)
// instead of multiplying the decoder's threads.
func TestLogicAlternativesCapped(t *testing.T) {
	t.Parallel()
	var deps []string
	for _, k := range "abcdefgh" {
		deps = append(deps, `"`+string(k)+`":{"required":["z`+string(k)+`"]}`)
	}
	s := `{"type":"object","dependentSchemas":{` + strings.Join(deps, ",") + `}}`
	set := jsonSet(t, s)
	if notes := notesOf(set); strings.Count(notes, "too many conditional alternatives") != 2 {
		t.Errorf("notes %q: want the last two dependent schemas checked after generation", notes)
	}
	runKeywordCases(t, []keywordCase{
		{s, `{"a":1,"za":2}`, true, true},
		{s, `{"a":1}`, false, false},
		{s, `{"h":1,"zh":2}`, true, true},
		{s, `{"h":1}`, true, false},
	})
}

// TestLogicKeywordsAgainstValidator compares the decoder with the
// validator on every pair of a few schemas using the logic keywords and a
// pool of small instances: where the tool notes nothing, the mask accepts
// exactly the valid instances; where it notes a keyword checked after
// generation, the mask accepts every valid instance and the final
// validation refuses every invalid one the mask let through.
func TestLogicKeywordsAgainstValidator(t *testing.T) {
	t.Parallel()
	schemas := []string{
		`{"not":{"type":["string","null"]}}`,
		`{"not":{"enum":["a",1,null,true]}}`,
		`{"not":{"const":[1]}}`,
		`{"not":{"required":["a"]}}`,
		`{"not":{"properties":{"a":{"type":"integer"}}}}`,
		`{"not":{"anyOf":[{"type":"string","minLength":2},{"type":"number","maximum":1},{"type":"array","minItems":1},{"minProperties":2}]}}`,
		`{"not":{"allOf":[{"type":"object"},{"required":["kind"]}]}}`,
		`{"properties":{"a":{"not":{"type":"integer"}}}}`,
		`{"if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},"then":{"required":["x"]},"else":{"properties":{"x":false}}}`,
		`{"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]}}`,
		`{"if":{"type":"string"},"then":{"minLength":2},"else":{"type":["object","array"]}}`,
		`{"if":{"required":["a"]},"then":{"properties":{"b":{"type":"string"}},"required":["b"]}}`,
		`{"allOf":[{"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]}},{"if":{"properties":{"kind":{"const":"b"}}},"then":{"required":["y"]}}]}`,
		`{"dependentSchemas":{"a":{"required":["b"]},"b":{"properties":{"a":{"minimum":5}}}}}`,
		`{"oneOf":[{"type":"integer"},{"minimum":2}]}`,
		`{"oneOf":[{"required":["a"]},{"required":["b"]},{"type":"array"}]}`,
		`{"oneOf":[{"properties":{"kind":{"const":"a"}},"required":["kind"]},{"properties":{"kind":{"const":"b"}},"required":["kind"]}],"type":"object"}`,
		`{"type":"array","uniqueItems":true}`,
		`{"type":"array","items":{"not":{"type":"object"}},"uniqueItems":true}`,
		`{"type":"array","items":{"enum":["a","b",1,[1]]},"uniqueItems":true}`,
	}
	pool := []string{`null`, `true`, `false`, `0`, `1`, `2.5`, `5`, `6`, `""`, `"a"`, `"ab"`, `"b"`, `"abc"`,
		`[]`, `[1]`, `[1,1]`, `[1,1.0]`, `["a","a"]`, `["a","b"]`, `["a",1,"b"]`, `[[1],[1]]`, `[{},{}]`, `[{"a":1},{"a":2}]`, `[null,false,null]`,
		`{}`, `{"a":1}`, `{"a":2.5}`, `{"a":"s"}`, `{"b":"x"}`, `{"a":1,"b":"x"}`, `{"b":"x","a":6}`, `{"a":6,"b":"x"}`, `{"kind":"a"}`, `{"kind":"a","x":"s"}`,
		`{"x":"s","kind":"a"}`, `{"kind":"b","y":1}`, `{"kind":"b","x":1}`, `{"kind":"c"}`, `{"x":1}`, `{"y":1}`, `{"kind":"a","x":1,"y":2}`}
	for _, s := range schemas {
		set := jsonSet(t, s)
		notes := notesOf(set)
		for _, inst := range pool {
			mask, err := feed(set.NewRun(), set.vi, byteIDs(inst), true)
			if err != nil {
				// A dead end is the mask refusing.
				mask = false
			}
			valid := validateWith(t, s, inst)
			switch {
			case valid && !mask:
				t.Errorf("%s / %s: valid, refused by the mask", s, inst)
			case !valid && mask && notes == "":
				t.Errorf("%s / %s: invalid, accepted by the mask with nothing checked after generation", s, inst)
			case !valid && mask && finalValid(set, inst):
				t.Errorf("%s / %s: invalid, accepted by the mask and the final validation", s, inst)
			}
		}
	}
}

// validateWith validates inst against schema with a fresh validator (the
// reference the decoder is compared with).
func validateWith(t *testing.T, schema, inst string) bool {
	t.Helper()
	set, err := Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator, Mode: contracts.ToolModeSoft,
		Params: map[string]json.RawMessage{"schema": json.RawMessage(`{"anyOf":[` + schema + `]}`)}}}, nil, fake, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	return finalValid(set, inst)
}

// TestUniqueItemsLlamaTokens: with the llama vocabulary, whose tokens
// close a string after some text ("hello\"" and the like), the masks agree
// with a byte-by-byte decode on duplicates and near duplicates.
func TestUniqueItemsLlamaTokens(t *testing.T) {
	tok := toolstest.LlamaVocab(t)
	bt := byteTokens(t, tok)
	set, err := compileSchema([]byte(`{"type":"array","items":{"type":"string"},"uniqueItems":true}`), tok)
	if err != nil {
		t.Fatal(err)
	}
	for inst, want := range map[string]bool{
		`["hello","hello"]`: false, `["hello","hello world"]`: true, `["hello world","hello"]`: true,
		`["a\"b","a\"b"]`: false, `["a\"b","a\\"]`: true, `["x1","x1"]`: false, `["foo bar","foo bar"]`: false,
		`[" ","  "]`: true, `["name","Name","name"]`: false, `["é","\u00e9"]`: false,
	} {
		res := decodeInstance(t, set, tok, bt, inst, true)
		if res.tokens != want || res.bytes != want {
			t.Errorf("%s: token by token %v, byte by byte %v, want %v", inst, res.tokens, res.bytes, want)
		}
	}
}
