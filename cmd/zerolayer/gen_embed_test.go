package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestGenEmbed: gen --embed prints a unit vector of the model's width (or
// --dimensions), the same for the same prompt, and refuses bad flags.
func TestGenEmbed(t *testing.T) {
	path := storiesPath(t)
	type vec struct {
		Embedding    []float32 `json:"embedding"`
		Dimensions   int       `json:"dimensions"`
		Pooling      string    `json:"pooling"`
		PromptTokens int       `json:"prompt_tokens"`
	}
	run := func(args ...string) vec {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"gen", "--model", path, "--prompt", "Once upon a time", "--embed"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: status %d: %s", args, code, errOut)
		}
		var v vec
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out)
		}
		var ss float64
		for _, x := range v.Embedding {
			ss += float64(x) * float64(x)
		}
		if len(v.Embedding) != v.Dimensions || math.Abs(ss-1) > 1e-5 || v.PromptTokens < 2 {
			t.Fatalf("%v: %d components (dimensions %d) of norm² %g, %d tokens", args, len(v.Embedding), v.Dimensions, ss, v.PromptTokens)
		}
		return v
	}
	mean := run()
	if mean.Pooling != "mean" || mean.Dimensions != 64 {
		t.Fatalf("stories260K (no pooling_type): %s pooling, %d dimensions", mean.Pooling, mean.Dimensions)
	}
	if again := run(); !equalVec(again.Embedding, mean.Embedding) {
		t.Fatal("the same prompt gave another vector")
	}
	if last := run("--pooling", "last", "--dimensions", "16"); last.Pooling != "last" || last.Dimensions != 16 || equalVec(last.Embedding, mean.Embedding[:16]) {
		t.Fatalf("--pooling last --dimensions 16: %s, %d", last.Pooling, last.Dimensions)
	}
	for _, bad := range [][]string{{"--pooling", "max"}, {"--dimensions", "65"}} {
		code, _, errOut := runCLI(append([]string{"gen", "--model", path, "--prompt", "x", "--embed"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: status %d, %q", bad, code, errOut)
		}
	}
}

func equalVec(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
