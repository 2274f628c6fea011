package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// compileRun compiles tools for the engine's vocabulary and returns a run.
func compileRun(t *testing.T, e *engine.Engine, rf *contracts.ResponseFormat, specs ...contracts.Tool) *tools.Run {
	t.Helper()
	set, err := tools.Compile(specs, rf, e.Tokenizer(), tools.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	return set.NewRun()
}

func toolSpec(name contracts.ToolName, mode contracts.ToolMode, params map[string]any) contracts.Tool {
	t := contracts.Tool{Name: name, Mode: mode, Params: map[string]json.RawMessage{}}
	for k, v := range params {
		b, _ := json.Marshal(v)
		t.Params[k] = b
	}
	return t
}

// TestMaxTokensInsideAConstraint: max_tokens reached before a constraint
// is satisfied ends with max_tokens and an incomplete output, not a tool
// error; a UTF-8 character the budget cut is left out, so the text stays
// valid UTF-8, and the streamed text is the same.
func TestMaxTokensInsideAConstraint(t *testing.T) {
	t.Parallel()
	l, e, _ := setup(t)
	ids, _ := l.Prompt("Once upon a time", prompt.Options{})
	greek := &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `\p{Greek}+`}
	schema := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema,
		Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
	for _, tc := range []struct {
		name string
		rf   *contracts.ResponseFormat
		max  int
	}{
		// stories260K spells a Greek letter with two or three byte
		// tokens: one token is part of a character.
		{"greek 1", greek, 1},
		{"greek 2", greek, 2},
		{"greek 3", greek, 3},
		{"greek 4", greek, 4},
		{"greek 5", greek, 5},
		{"json", schema, 12},
	} {
		run := compileRun(t, e, tc.rf)
		var streamed strings.Builder
		res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: tc.max, Tools: run,
			OnToken: func(tk engine.Token) error { streamed.WriteString(tk.Text); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if res.Err != nil || res.StopReason != engine.StopMaxTokens {
			t.Errorf("%s: stop %s, err %v; want max_tokens and no error", tc.name, res.StopReason, res.Err)
			continue
		}
		if len(res.OutputIDs) != tc.max || res.Usage.OutputTokens != tc.max {
			t.Errorf("%s: %d tokens (usage %d), want %d", tc.name, len(res.OutputIDs), res.Usage.OutputTokens, tc.max)
		}
		if !utf8.ValidString(res.Text) || streamed.String() != res.Text {
			t.Errorf("%s: text %q (streamed %q) is not valid UTF-8 or differs", tc.name, res.Text, streamed.String())
		}
		var raw []byte
		for _, id := range res.OutputIDs {
			raw = append(raw, e.Tokenizer().Piece(id)...)
		}
		wantCut := !utf8.Valid(raw) // the tokens end inside a character
		t.Logf("%s: tokens %q, text %q, incomplete %v %q", tc.name, raw, res.Text, res.Incomplete, res.IncompleteReason)
		cut := strings.Contains(res.IncompleteReason, "UTF-8 character")
		unsatisfied := strings.Contains(res.IncompleteReason, "before the constraint was satisfied")
		switch {
		case cut != wantCut:
			t.Errorf("%s: tokens %q, text %q, reason %q: want a cut character %v", tc.name, raw, res.Text, res.IncompleteReason, wantCut)
		case tc.rf == greek && unsatisfied != (wantCut || res.Text == ""):
			t.Errorf("%s: text %q, reason %q: constraint unsatisfied %v", tc.name, res.Text, res.IncompleteReason, unsatisfied)
		case tc.rf == schema && !unsatisfied:
			t.Errorf("%s: text %q, reason %q: want the schema unsatisfied", tc.name, res.Text, res.IncompleteReason)
		case res.Incomplete != (cut || unsatisfied):
			t.Errorf("%s: incomplete %v, reason %q", tc.name, res.Incomplete, res.IncompleteReason)
		}
		if tc.rf == greek {
			for _, r := range res.Text {
				if !unicode.Is(unicode.Greek, r) {
					t.Errorf("%s: %q is not Greek", tc.name, res.Text)
				}
			}
		}
		if trimmed := strings.TrimSpace(res.Text); tc.rf == schema && (!strings.HasPrefix(trimmed, "{") || json.Valid([]byte(trimmed))) {
			t.Errorf("%s: %q is not the start of a JSON object", tc.name, res.Text)
		}
		if rep := run.Report(); unsatisfied && (rep[0].Status != contracts.ToolStatusOK || !strings.Contains(rep[0].Detail, "incomplete")) {
			t.Errorf("%s: report %+v", tc.name, rep)
		}
	}
	// A constraint satisfied when max_tokens comes is whole, not incomplete.
	res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 8,
		Tools: compileRun(t, e, &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `[a-z ]+`})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || res.StopReason != engine.StopMaxTokens || res.Incomplete {
		t.Errorf("lower-case text: stop %s, err %v, incomplete %v %q", res.StopReason, res.Err, res.Incomplete, res.IncompleteReason)
	}
}

// TestRetriesAreCountedAndDiffer: a retry_on_fail retry at temperature 0
// is not a repeat of the failed attempt: it follows it up to the token
// with which the marker began and takes another token there. Usage counts
// both attempts' tokens.
func TestRetriesAreCountedAndDiffer(t *testing.T) {
	t.Parallel()
	l, e, _ := setup(t)
	ids, _ := l.Prompt("Once upon a time", prompt.Options{})
	first, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(first.Text)
	if len(words) < 6 {
		t.Fatalf("greedy output too short: %q", first.Text)
	}
	marker := " " + words[len(words)/2]
	at := strings.Index(first.Text, marker)
	retry := toolSpec(contracts.ToolRetryOnFail, contracts.ToolModeSoft, map[string]any{"output_contains": []string{marker}, "max_retries": 1})
	res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 40, Tools: compileRun(t, e, nil, retry)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || res.Retries != 1 {
		t.Fatalf("retries %d, err %v", res.Retries, res.Err)
	}
	if got, want := res.Usage.OutputTokens, len(first.OutputIDs)+len(res.OutputIDs); got != want {
		t.Errorf("usage output_tokens %d, want %d (both attempts)", got, want)
	}
	if res.Usage.RetriedOutputTokens != len(first.OutputIDs) {
		t.Errorf("retried_output_tokens %d, want %d", res.Usage.RetriedOutputTokens, len(first.OutputIDs))
	}
	if slices.Equal(res.OutputIDs, first.OutputIDs) || res.Text == first.Text {
		t.Fatalf("the temperature-0 retry repeated the failed attempt: %q", res.Text)
	}
	// It kept the failed attempt's text before the marker.
	if !strings.HasPrefix(res.Text, first.Text[:at]) {
		t.Errorf("retry %q does not keep the prefix %q before the marker %q", res.Text, first.Text[:at], marker)
	}
	if res.Usage.TotalMs <= 0 || res.Usage.TimePerTokenMs <= 0 {
		t.Errorf("timings %+v", res.Usage)
	}
}

// TestRetryBanNeverEmptiesTheMask: when the constraints allow only the
// tokens earlier attempts were banned from, the ban is not applied (a
// repeat, reported by the soft retry tool) rather than leaving no token
// to sample.
func TestRetryBanNeverEmptiesTheMask(t *testing.T) {
	t.Parallel()
	l, e, _ := setup(t)
	ids, _ := l.Prompt("Once upon a time", prompt.Options{})
	retry := toolSpec(contracts.ToolRetryOnFail, contracts.ToolModeSoft, map[string]any{"output_contains": []string{"a"}, "max_retries": 4})
	run := compileRun(t, e, &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: "a"}, retry)
	res, err := e.Generate(context.Background(), engine.Request{PromptIDs: ids, MaxTokens: 8, Tools: run})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || res.Text != "a" || res.Retries != 4 || res.StopReason != engine.StopConstraint {
		t.Fatalf("text %q, stop %s, retries %d, err %v", res.Text, res.StopReason, res.Retries, res.Err)
	}
	if rep := run.Report(); rep[0].Tool != "retry_on_fail" || rep[0].Status != contracts.ToolStatusViolated {
		t.Errorf("report %+v", rep)
	}
}
