package modeltest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// SharedDir returns the shared fixtures folder: "shared" beside the module
// root (the folder holding go.mod, found from the working directory up).
// It returns "../shared" relative to the working directory when no go.mod
// is found.
func SharedDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared")
		}
		if filepath.Dir(d) == d {
			return filepath.Join("..", "shared")
		}
	}
}

// SharedPath returns the path of rel (slash-separated) in the shared
// fixtures folder, skipping the test when it is not there.
func SharedPath(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedDir(), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present: %v", rel, err)
	}
	return p
}

// StoriesPath returns the path of stories260K.gguf, skipping the test when
// the shared fixtures are absent.
func StoriesPath(t testing.TB) string {
	t.Helper()
	return SharedPath(t, "models/stories260K/stories260K.gguf")
}

// Case is one reference generation of reference.json: a prompt and the
// greedy output of the reference implementation (llama2.c run.c for
// stories260K).
type Case struct {
	Name          string  `json:"name"`
	Prompt        string  `json:"prompt"`
	PromptIDs     []int32 `json:"prompt_ids"`
	GeneratedIDs  []int32 `json:"generated_ids"`
	GeneratedText string  `json:"generated_text"`
	// LogitsStep0 are the logits after the prompt; nil when not recorded.
	LogitsStep0 []float32 `json:"logits_step0"`
}

// Reference is a model's reference.json.
type Reference struct {
	Cases []Case `json:"cases"`
	// LongCases run past the first blocks of the context.
	LongCases []Case `json:"long_cases"`
}

// StoriesReference reads stories260K's reference.json, skipping the test
// when the shared fixtures are absent.
func StoriesReference(t testing.TB) Reference {
	t.Helper()
	return ReadReference(t, SharedPath(t, "models/stories260K"))
}

// ReadReference reads dir/reference.json, skipping the test when it is not
// there and failing it when it does not parse.
func ReadReference(t testing.TB, dir string) Reference {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Skipf("shared fixtures not present: %v", err)
	}
	var ref Reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}
