package sched

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
	"github.com/zerolayer/zerolayer/worker/tools"
)

// TestDraftsJSONSchemaSuite: for every schema of the JSON-Schema-Test-Suite
// (draft 2020-12) that has a valid instance and compiles, a greedy job
// under it gives the same tokens with drafts and without, many at a time
// (with -short, every seventh schema).
func TestDraftsJSONSchemaSuite(t *testing.T) {
	t.Parallel()
	dir := modeltest.SharedPath(t, "testdata/json-schema-test-suite/tests/draft2020-12")
	l := modeltest.LoadStories(t, 1)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	prompt := l.Tokenizer.Encode("Once upon a time", tokenizer.EncodeOptions{AddSpecial: true})
	var jobs []draftJob
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []struct {
			Schema json.RawMessage `json:"schema"`
			Tests  []struct {
				Valid bool `json:"valid"`
			} `json:"tests"`
		}
		if err := json.Unmarshal(b, &groups); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range groups {
			if !slices.ContainsFunc(g.Tests, func(c struct {
				Valid bool `json:"valid"`
			}) bool {
				return c.Valid
			}) {
				continue
			}
			rf := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: g.Schema}
			if _, err := tools.Compile(nil, rf, l.Tokenizer, tools.Budget{}); err != nil {
				continue // a schema the constraint does not support
			}
			if n++; testing.Short() && n%7 != 0 {
				continue
			}
			jobs = append(jobs, draftJob{prompt: prompt, max: 48, format: rf})
		}
	}
	if least := 50; testing.Short() && len(jobs) < least/7 || !testing.Short() && len(jobs) < least {
		t.Fatalf("only %d schemas of the suite compile", len(jobs))
	}
	want, _ := runDrafts(t, l, newSched(t, l, small(Config{NoDrafts: true})), jobs)
	on := newSched(t, l, small(withDrafts(Config{})))
	got, stats := runDrafts(t, l, on, jobs)
	var tokens, passes, accepted int
	for i := range jobs {
		if !slices.Equal(got[i].OutputIDs, want[i].OutputIDs) || got[i].StopReason != want[i].StopReason {
			t.Fatalf("schema %s: with drafts %q (%s)\nwithout %q (%s)", jobs[i].format.Schema, got[i].Text, got[i].StopReason, want[i].Text, want[i].StopReason)
		}
		tokens += len(got[i].OutputIDs)
		passes += stats[i].SampleSteps
		accepted += stats[i].AcceptedDraftTokens
	}
	t.Logf("%d schemas: %d tokens in %d sampling passes (%.2f a token), %d draft tokens accepted", len(jobs), tokens, passes, float64(passes)/float64(tokens), accepted)
	if accepted == 0 {
		t.Fatal("no draft accepted")
	}
	checkIdle(t, on)
}
