package tools

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/contracts"
)

// FuzzCompileSchema compiles arbitrary schemas: no panic, errors are
// contract errors, and a compiled schema with nothing left to the final
// validation never accepts a document the validator rejects.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"type":"integer","minimum":3}}}`,
		`{"anyOf":[{"type":"string","maxLength":2},{"enum":[1,"x",null]}]}`, `true`, `false`,
		`{"items":{"$ref":"#"},"maxItems":2}`, `{"oneOf":[{"type":"null"},{"type":"boolean"}]}`,
		`{"type":"number","multipleOf":0.5,"exclusiveMaximum":3}`,
		`{"not":{"enum":["a",1]},"type":["string","integer"]}`, `{"if":{"properties":{"a":{"const":4}}},"then":{"required":["b"]},"else":{"maxProperties":1}}`,
		`{"dependentSchemas":{"a":{"properties":{"b":{"not":{"type":"null"}}}}}}`, `{"oneOf":[{"required":["a"]},{"minProperties":2}]}`,
		`{"items":{"type":["string","number"]},"uniqueItems":true}`} {
		f.Add(s, `{"a":4}`)
	}
	f.Fuzz(func(t *testing.T, schema, doc string) {
		if len(schema) > 2000 || len(doc) > 200 {
			return
		}
		set, err := Compile([]contracts.Tool{{Name: contracts.ToolJSONValidator,
			Params: map[string]json.RawMessage{"schema": json.RawMessage(schema)}}}, nil, fake, Budget{CompileTimeout: 1e9})
		if err != nil {
			if _, ok := err.(*contracts.Error); !ok {
				t.Fatalf("not a contract error: %v", err)
			}
			return
		}
		r := set.NewRun()
		for i := 0; i < len(doc); i++ {
			if r.Accept(int32(doc[i])+1) != nil {
				return
			}
		}
		if !r.CanEnd() {
			return
		}
		// A keyword checked after generation (a note) may refuse it there.
		if _, err := r.Finish(); err != nil && utf8.ValidString(doc) && len(set.tools[0].notes) == 0 {
			t.Fatalf("schema %s accepted %q, which fails: %v", schema, doc, err)
		}
	})
}

// FuzzParseSystem: no panic; what is returned compiles or is a contract
// error.
func FuzzParseSystem(f *testing.F) {
	f.Add(`hi <tool name="suffix"><param name="text">x</param></tool>`)
	f.Add(`<tool name="json_validator" mode="soft"><param name="schema"><![CDATA[{"type":"string"}]]></param></tool>`)
	f.Add(`<tool name="low_latency_mode"/><tool name="regex_matcher" context_id="a"><param name="pattern">x.*</param></tool>`)
	f.Fuzz(func(t *testing.T, sys string) {
		rest, tools, err := contracts.ParseSystem(sys)
		if err != nil {
			if _, ok := err.(*contracts.Error); !ok {
				t.Fatalf("not a contract error: %v", err)
			}
			return
		}
		if len(rest) > len(sys) {
			t.Fatal("prompt grew")
		}
		if _, err := Compile(tools, nil, fake, Budget{}); err != nil {
			if _, ok := err.(*contracts.Error); !ok {
				t.Fatalf("not a contract error: %v", err)
			}
		}
	})
}

// FuzzPIIStream: whatever the cuts, streaming gives the same text as one
// chunk.
func FuzzPIIStream(f *testing.F) {
	f.Add("mail a.b@example.com now", 3, 11)
	f.Add("card 4111111111111111!", 7, 9)
	set, err := Compile([]contracts.Tool{{Name: contracts.ToolPIIRedactor}}, nil, fake, Budget{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, i, j int) {
		if len(text) > 300 || i < 0 || j < i || j > len(text) {
			return
		}
		want := piiRedact(t, set, []string{text})
		if got := piiRedact(t, set, []string{text[:i], text[i:j], text[j:]}); got != want {
			t.Fatalf("cut %d,%d: %q, want %q", i, j, got, want)
		}
	})
}
