package toolstest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SuiteGroup is one schema of the JSON-Schema-Test-Suite with its test
// instances.
type SuiteGroup struct {
	// Description names the group.
	Description string `json:"description"`
	// Schema is the schema the instances are checked against.
	Schema json.RawMessage `json:"schema"`
	// Tests are the instances, each with whether it is valid.
	Tests []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// SuiteDir returns the JSON-Schema-Test-Suite folder in the shared test
// data, or skips the test.
func SuiteDir(t testing.TB) string {
	return filepath.Join(SharedDir(t), "testdata", "json-schema-test-suite")
}

// SuiteFiles returns the suite's files in sub, a folder below
// tests/draft2020-12 ("" for the required tests, "optional/format" for
// the format tests).
func SuiteFiles(t testing.TB, sub string) []string {
	files, _ := filepath.Glob(filepath.Join(SuiteDir(t), "tests", "draft2020-12", filepath.FromSlash(sub), "*.json"))
	return files
}

// ReadSuiteFile reads the groups of one suite file, failing the test on
// a read or decode error.
func ReadSuiteFile(t testing.TB, path string) []SuiteGroup {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gs []SuiteGroup
	if err := json.Unmarshal(b, &gs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return gs
}

// RemotesLoader serves the suite's remotes/ folder as
// http://localhost:1234/, as the suite expects.
type RemotesLoader struct {
	// Dir is the remotes folder.
	Dir string
}

// Load reads the remote document at u.
func (l RemotesLoader) Load(u string) (any, error) {
	const prefix = "http://localhost:1234/"
	if !strings.HasPrefix(u, prefix) {
		return nil, fmt.Errorf("no remote %s", u)
	}
	f, err := os.Open(filepath.Join(l.Dir, filepath.FromSlash(strings.TrimPrefix(u, prefix))))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}
