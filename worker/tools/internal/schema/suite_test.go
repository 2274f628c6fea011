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

// TestSuiteOptionalFormats runs every optional format file through the
// validation path: with format assertion on the formats json_validator
// enforces, where at least 90% must agree with the suite; without it on
// the others, which stay annotations (every instance passes). (The tools package runs the same
// tests through the constrained decoder.)
func TestSuiteOptionalFormats(t *testing.T) {
	t.Parallel()
	files := toolstest.SuiteFiles(t, "optional/format")
	if len(files) == 0 {
		t.Fatal("no optional format files")
	}
	var vPass, vTotal, annotations int
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		_, enforced := FormatPatterns[name]
		for _, g := range toolstest.ReadSuiteFile(t, file) {
			root, _ := DecodeJSON(g.Schema)
			doc, err := newSchemaDoc(root)
			if err != nil {
				t.Fatal(err)
			}
			// Formats the grammar does not enforce stay annotations, as
			// json_validator's final validation leaves them.
			v, err := newValidator(g.Schema, doc.rootURL, nil, enforced)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range g.Tests {
				inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(tc.Data)))
				ok := v.validate("", inst) == nil
				if !enforced {
					annotations++
					if !ok {
						t.Errorf("%s / %s: %s refused, but format %q is not asserted", name, tc.Description, tc.Data, name)
					}
					continue
				}
				vTotal++
				if ok == tc.Valid {
					vPass++
				} else {
					t.Logf("validator disagrees: %s / %s: %s", name, tc.Description, tc.Data)
				}
			}
		}
	}
	t.Logf("optional formats (%d files): validator agrees %d/%d on enforced formats; %d instances of other formats all pass", len(files), vPass, vTotal, annotations)
	if vTotal == 0 || float64(vPass) < 0.9*float64(vTotal) {
		t.Errorf("validator agrees on %d/%d optional format tests (< 90%%)", vPass, vTotal)
	}
}
