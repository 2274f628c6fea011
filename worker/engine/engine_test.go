package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/sample"
)

// setup loads stories260K and its reference cases.
func setup(t *testing.T) (*engine.Loaded, *engine.Engine, []modeltest.Case) {
	t.Helper()
	l := modeltest.LoadStories(t, 2)
	e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	return l, e, modeltest.StoriesReference(t).Cases
}

func TestGreedyMatchesReference(t *testing.T) {
	t.Parallel()
	l, e, cases := setup(t)
	var reqs []engine.Request
	for _, c := range cases {
		ids, err := l.Prompt(c.Prompt, prompt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, c.PromptIDs) {
			t.Fatalf("%s: prompt ids %v, reference %v", c.Name, ids, c.PromptIDs)
		}
		var streamed strings.Builder
		res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: len(c.GeneratedIDs), OnToken: func(tk engine.Token) error {
			streamed.WriteString(tk.Text)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.OutputIDs, c.GeneratedIDs) {
			t.Errorf("%s: generated %v\nreference %v", c.Name, res.OutputIDs, c.GeneratedIDs)
		}
		if res.Text != c.GeneratedText || streamed.String() != res.Text {
			t.Errorf("%s: text %q, streamed %q, reference %q", c.Name, res.Text, streamed.String(), c.GeneratedText)
		}
		if res.StopReason != engine.StopMaxTokens || res.Usage.OutputTokens != len(c.GeneratedIDs) || res.Usage.InputTokens != len(ids) {
			t.Errorf("%s: stop %s, usage %+v", c.Name, res.StopReason, res.Usage)
		}
		if res.Usage.TimeToFirstTokenMs <= 0 || res.Usage.TimePerTokenMs <= 0 {
			t.Errorf("%s: timings not measured: %+v", c.Name, res.Usage)
		}
		reqs = append(reqs, engine.Request{PromptIDs: ids, MaxTokens: len(c.GeneratedIDs)})
	}
	// All six prompts decoded together give the same tokens.
	batch, err := e.GenerateBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if !slices.Equal(batch[i].OutputIDs, c.GeneratedIDs) {
			t.Errorf("%s in a batch: generated %v\nreference %v", c.Name, batch[i].OutputIDs, c.GeneratedIDs)
		}
	}
}

func TestSamplingIsSeeded(t *testing.T) {
	t.Parallel()
	l, e, _ := setup(t)
	ids, _ := l.Prompt("Once upon a time", prompt.Options{})
	run := func(seed uint64) []int32 {
		res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 40, Sampling: sample.Params{Temperature: 1, Seed: seed}, TopLogprobs: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.TopLogprobs) != len(res.OutputIDs) || len(res.TopLogprobs[0]) != 3 {
			t.Fatalf("top logprobs: %d steps for %d tokens", len(res.TopLogprobs), len(res.OutputIDs))
		}
		return res.OutputIDs
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different output:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 gave the same %d tokens", len(a))
	}
}

func TestStopSequence(t *testing.T) {
	t.Parallel()
	l, e, cases := setup(t)
	ids, _ := l.Prompt(cases[0].Prompt, prompt.Options{})
	res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 64, Stop: []string{"Lily"}})
	if err != nil {
		t.Fatal(err)
	}
	want := cases[0].GeneratedText[:strings.Index(cases[0].GeneratedText, "Lily")]
	if res.StopReason != engine.StopSequence || res.Text != want {
		t.Fatalf("stop %s, text %q, want %q", res.StopReason, res.Text, want)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	_, e, _ := setup(t)
	long := make([]int32, e.Model().Context)
	for i := range long {
		long[i] = 300
	}
	tests := []struct {
		name    string
		req     engine.Request
		wantErr error
	}{
		{"empty prompt", engine.Request{}, engine.ErrEmptyPrompt},
		{"prompt fills the context", engine.Request{PromptIDs: long}, engine.ErrPromptTooLong},
		{"token outside vocabulary", engine.Request{PromptIDs: []int32{1, 512}}, engine.ErrBadRequest},
		{"negative max tokens", engine.Request{PromptIDs: []int32{1}, MaxTokens: -1}, engine.ErrBadRequest},
		{"bad temperature", engine.Request{PromptIDs: []int32{1}, Sampling: sample.Params{Temperature: 5}}, sample.ErrInvalidParams},
	}
	for _, tt := range tests {
		if _, err := e.Generate(context.Background(), tt.req); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	_, e, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := e.Generate(ctx, engine.Request{PromptIDs: []int32{1}, MaxTokens: 100, OnToken: func(engine.Token) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != engine.StopCanceled || len(res.OutputIDs) != 5 {
		t.Fatalf("stop %s after %d tokens", res.StopReason, len(res.OutputIDs))
	}
}
