package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

func storiesPath(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", "stories260K", "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared model not present: %v", err)
	}
	return p
}

// capture runs a command with stdout redirected (tests using it are not
// parallel).
func capture(t *testing.T, run func(context.Context, []string) error, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	old := stdout
	stdout = &buf
	defer func() { stdout = old }()
	err := run(context.Background(), args)
	return buf.String(), err
}

func TestGenJSON(t *testing.T) {
	path := storiesPath(t)
	out, err := capture(t, runGen, "--model", path, "--prompt", "Once upon a time", "--max-tokens", "8", "--top-logprobs", "3", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got genOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// The reference's first 8 greedy tokens for this prompt.
	if !slices.Equal(got.PromptIDs, []int32{1, 403, 407, 261, 378}) || !slices.Equal(got.OutputIDs, []int32{432, 383, 286, 261, 376, 298, 315, 421}) {
		t.Fatalf("ids: prompt %v output %v", got.PromptIDs, got.OutputIDs)
	}
	if got.Text != ", there was a little girl" || got.StopReason != engine.StopMaxTokens {
		t.Fatalf("text %q stop %q", got.Text, got.StopReason)
	}
	if got.Usage.InputTokens != 5 || got.Usage.OutputTokens != 8 || got.Usage.TimeToFirstTokenMs <= 0 {
		t.Fatalf("usage %+v", got.Usage)
	}
	if len(got.TopLogprobs) != 8 || len(got.TopLogprobs[0]) != 3 || got.TopLogprobs[0][0].ID != 432 || got.TopLogprobs[0][0].Logprob > 0 {
		t.Fatalf("top logprobs %+v", got.TopLogprobs)
	}
	// --prompt-ids take the same ids as given, and the JSON keys are stable.
	out2, err := capture(t, runGen, "--model", path, "--prompt-ids", "1,403,407,261,378", "--max-tokens", "8", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal([]byte(out2), &raw)
	for _, k := range []string{"prompt_ids", "output_ids", "text", "stop_reason", "usage"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("json output lacks %q", k)
		}
	}
	if !strings.Contains(out2, `"time_per_token_ms"`) || !strings.Contains(out2, ", there was a little girl") {
		t.Errorf("prompt-ids output: %s", out2)
	}
}

func TestGenText(t *testing.T) {
	path := storiesPath(t)
	out, err := capture(t, runGen, "--model", path, "--prompt", "Once upon a time", "--max-tokens", "8")
	if err != nil || out != ", there was a little girl\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestGenErrors(t *testing.T) {
	path := storiesPath(t)
	var ue usageError
	tests := []struct {
		name  string
		args  []string
		check func(error) bool
	}{
		{"no prompt", []string{"--model", path}, func(err error) bool { return errors.As(err, &ue) }},
		{"both prompts", []string{"--model", path, "--prompt", "a", "--prompt-ids", "1"}, func(err error) bool { return errors.As(err, &ue) }},
		{"bad ids", []string{"--model", path, "--prompt-ids", "1,x"}, func(err error) bool { return errors.As(err, &ue) }},
		{"unknown model", []string{"--model", "no-such-model", "--prompt", "a"}, func(err error) bool { return errors.Is(err, store.ErrNotFound) }},
		{"prompt over the context", []string{"--model", path, "--prompt", strings.Repeat("dog ", 3000)}, func(err error) bool { return errors.Is(err, engine.ErrPromptTooLong) }},
		{"system without chat", []string{"--model", path, "--prompt", "a", "--system", "be nice"}, func(err error) bool { return errors.Is(err, engine.ErrBadRequest) }},
		{"unknown preset", []string{"--model", path, "--prompt", "a", "--preset", "wild"}, func(err error) bool { return errors.As(err, &ue) }},
		{"bad format", []string{"--model", path, "--prompt", "a", "--format", "xml"}, func(err error) bool { return errors.As(err, &ue) }},
	}
	for _, tt := range tests {
		if _, err := capture(t, runGen, tt.args...); err == nil || !tt.check(err) {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

func TestGenChatPlainTemplate(t *testing.T) {
	path := storiesPath(t)
	// stories260K has no chat template, so the plain one renders the turn.
	out, err := capture(t, runGen, "--model", path, "--chat", "--system", "Be brief.", "--prompt", "Tell a story", "--max-tokens", "4", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got genOutput
	json.Unmarshal([]byte(out), &got)
	if len(got.PromptIDs) < 10 || got.PromptIDs[0] != 1 || len(got.OutputIDs) == 0 {
		t.Fatalf("chat prompt ids %v output %v", got.PromptIDs, got.OutputIDs)
	}
}

func TestModelsList(t *testing.T) {
	dir := filepath.Dir(storiesPath(t))
	t.Setenv("ZEROLAYER_MODEL_PATH", dir)
	out, err := capture(t, runModels, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stories260K") || !strings.Contains(out, "llama (5 layers, dim 64)") || !strings.Contains(out, "F32×48") {
		t.Fatalf("models list:\n%s", out)
	}
}
