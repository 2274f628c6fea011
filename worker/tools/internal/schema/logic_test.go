package schema

import (
	"regexp"
	"testing"
)

// TestNotInPattern: the pattern of "every string but these" matches
// exactly the strings outside the set, prefixes and extensions included.
func TestNotInPattern(t *testing.T) {
	t.Parallel()
	words := []string{"ab", "abc", "b", "é", "a.b", ""}
	re := regexp.MustCompile(`^` + notInPattern(words) + `$`)
	in := map[string]bool{}
	for _, w := range words {
		in[w] = true
	}
	for _, s := range []string{"", "a", "ab", "abc", "abcd", "abd", "b", "bb", "c", "é", "éé", "e", "a.b", "axb", "a\nb", "\n", "ab\n"} {
		if got := re.MatchString(s); got == in[s] {
			t.Errorf("%q: matches %v, want %v", s, got, !in[s])
		}
	}
	if !regexp.MustCompile(`^` + notInPattern(nil) + `$`).MatchString("x") {
		t.Error("no words: x refused")
	}
}

// TestNegationForms: which not forms negate exactly, and that the union
// of a negation's alternatives holds exactly the values the validator
// says the not accepts.
func TestNegationForms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		schema string
		exact  bool
	}{
		{`{"type":"string"}`, true},
		{`{"enum":[1,"a",null]}`, true},
		{`{"const":{"a":1}}`, true},
		{`{"required":["a","b"]}`, true},
		{`{"properties":{"a":{"minimum":3}},"required":["a"]}`, true},
		{`{"anyOf":[{"type":"string"},{"maxLength":3}]}`, true},
		{`{"allOf":[{"type":"string"},{"minLength":3}]}`, true},
		{`{"not":{"pattern":"^a"}}`, true},
		{`{"minimum":3}`, true},
		{`{"exclusiveMaximum":3}`, true},
		{`{"minLength":2,"maxItems":0}`, true},
		{`{"minProperties":1}`, true},
		{`{"maxProperties":1,"type":["object","string"]}`, true},
		{`{"pattern":"^a"}`, false},
		{`{"multipleOf":2}`, false},
		{`{"patternProperties":{"^a":false}}`, false},
		{`{"items":{"type":"string"}}`, false},
	} {
		root, err := DecodeJSON([]byte(`{"not":` + c.schema + `}`))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := newSchemaDoc(root)
		if err != nil {
			t.Fatal(err)
		}
		val, err := newValidator([]byte(`{"not":`+c.schema+`}`), doc.rootURL, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		sc := newSchemaCompiler(doc, val, false, Limits{}, nil, nil)
		alts, exact := sc.negation(sc.child(doc.byPtr[""], "not"), 0)
		if exact != c.exact {
			t.Errorf("not %s: exact %v, want %v", c.schema, exact, c.exact)
		}
		if !exact {
			continue
		}
		for _, inst := range []string{`null`, `true`, `1`, `3`, `2.5`, `"a"`, `"abcd"`, `{}`, `{"a":1}`, `{"a":5,"b":1}`, `{"b":1}`, `[]`, `["x"]`} {
			v, _ := DecodeJSON([]byte(inst))
			inNeg := false
			for _, a := range alts {
				ok, err := sc.locValid(a, v)
				if err != nil {
					t.Fatal(err)
				}
				inNeg = inNeg || ok
			}
			want := val.validate("", toPlain(v)) == nil // the root is {"not": schema}
			if inNeg != want {
				t.Errorf("not %s, %s: in the negation %v, validator says %v", c.schema, inst, inNeg, want)
			}
		}
	}
}
