package schema

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/zerolayer/zerolayer/worker/tools/internal/toolstest"
)

// TestSuiteValidationPath runs the required draft 2020-12 tests through
// the final-validation path (the Validator): all must pass.
func TestSuiteValidationPath(t *testing.T) {
	t.Parallel()
	files := toolstest.SuiteFiles(t, "")
	loader := toolstest.RemotesLoader{Dir: filepath.Join(toolstest.SuiteDir(t), "remotes")}
	pass, total := 0, 0
	for _, file := range files {
		for _, g := range toolstest.ReadSuiteFile(t, file) {
			root, err := DecodeJSON(g.Schema)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := newSchemaDoc(root)
			if err != nil {
				t.Errorf("%s / %s: %v", filepath.Base(file), g.Description, err)
				continue
			}
			v, err := newValidator(g.Schema, doc.rootURL, loader, false)
			if err == nil {
				_, err = v.at("")
			}
			for _, tc := range g.Tests {
				total++
				if err != nil {
					t.Errorf("%s / %s: schema: %v", filepath.Base(file), g.Description, err)
					continue
				}
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(tc.Data)))
				got := v.validate("", inst) == nil
				if got != tc.Valid {
					t.Errorf("%s / %s / %s: valid=%v, want %v", filepath.Base(file), g.Description, tc.Description, got, tc.Valid)
					continue
				}
				pass++
			}
		}
	}
	t.Logf("validation path: %d/%d required tests pass", pass, total)
	if total < 1299 {
		t.Errorf("only %d required tests found, want 1299", total)
	}
}

// TestSuiteOptionalFormats runs the optional format tests of the formats
// json_validator enforces through the validation path with format
// assertion: at least 90% must agree. (The tools package runs the same
// tests through the constrained decoder.)
func TestSuiteOptionalFormats(t *testing.T) {
	t.Parallel()
	var vPass, vTotal int
	for _, file := range toolstest.SuiteFiles(t, "optional/format") {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		if _, enforced := FormatPatterns[name]; !enforced {
			continue
		}
		for _, g := range toolstest.ReadSuiteFile(t, file) {
			root, _ := DecodeJSON(g.Schema)
			doc, err := newSchemaDoc(root)
			if err != nil {
				t.Fatal(err)
			}
			v, err := newValidator(g.Schema, doc.rootURL, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range g.Tests {
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(tc.Data)))
				vTotal++
				if (v.validate("", inst) == nil) == tc.Valid {
					vPass++
				} else {
					t.Logf("validator disagrees: %s / %s: %s", name, tc.Description, tc.Data)
				}
			}
		}
	}
	t.Logf("optional formats: validator agrees %d/%d", vPass, vTotal)
	if vTotal == 0 || float64(vPass) < 0.9*float64(vTotal) {
		t.Errorf("validator agrees on %d/%d optional format tests (< 90%%)", vPass, vTotal)
	}
}
