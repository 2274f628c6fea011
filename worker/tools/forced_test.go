package tools

import (
	"encoding/json"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
)

// TestForced: the bytes a constraint forces next are those every output
// it allows continues with, up to where a choice (or the end) comes; and
// asking changes nothing.
func TestForced(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"currency":{"enum":["GBP","GHS"]},"paid":{"type":"boolean"}},"required":["currency","paid"],"additionalProperties":false}`
	for _, tc := range []struct {
		name  string
		rf    *contracts.ResponseFormat
		after string // accepted first
		want  string
	}{
		// A space may come before the value.
		{"start", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, "", ``},
		{"object start", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, "{", `"`},
		{"a key begun", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, `{"c`, `urrency":"G`},
		{"enum tail", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, `{"currency":"GB`, `P","paid":`},
		{"a choice next", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, `{"currency":"GBP","paid":`, ``},
		{"literal", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}, `{"currency":"GBP","paid":f`, `alse}`},
		{"regex", &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `ID-[0-9]{2}-(ab|ac)`}, "ID-1", ``},
		{"regex after a choice", &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `ID-[0-9]{2}-(ab|ac)`}, "ID-12", `-a`},
		{"regex at the end", &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `ID-[0-9]{2}-(ab|ac)`}, "ID-12-ab", ``},
	} {
		set, err := Compile(nil, tc.rf, fake, Budget{})
		if err != nil {
			t.Fatal(err)
		}
		r := set.NewRun()
		for _, id := range byteIDs(tc.after) {
			if err := r.Accept(id); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		got := string(r.Forced(64))
		if got != tc.want {
			t.Errorf("%s: forced %q, want %q", tc.name, got, tc.want)
		}
		if again := string(r.Forced(64)); again != got {
			t.Errorf("%s: asked again %q, first %q: Forced changed the run", tc.name, again, got)
		}
		if short := string(r.Forced(3)); len(got) >= 3 && short != got[:3] {
			t.Errorf("%s: Forced(3) = %q, want %q", tc.name, short, got[:3])
		}
		// The forced bytes are allowed, and the output can still end.
		for _, id := range byteIDs(got) {
			if err := r.Accept(id); err != nil {
				t.Fatalf("%s: forced %q not accepted: %v", tc.name, got, err)
			}
		}
	}
}
