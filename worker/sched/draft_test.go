package sched

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sample"
	"github.com/zerolayer/zerolayer/worker/tools"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		toks []int32
		max  int
		want []int32
	}{
		// The 3-gram 1 2 3 occurred at the start: what followed it.
		{[]int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 3, []int32{4, 5, 6}},
		{[]int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 8, []int32{4, 5, 6, 9, 1, 2, 3}},
		// The latest occurrence of the longest n-gram wins: 7 2 3 is
		// longer than 2 3 alone.
		{[]int32{7, 2, 3, 10, 8, 2, 3, 11, 7, 2, 3}, 2, []int32{10, 8}},
		{[]int32{5, 2, 3, 10, 8, 2, 3, 11, 7, 2, 3}, 2, []int32{11, 7}},
		// No n-gram of two tokens repeats: no draft.
		{[]int32{1, 2, 3, 4, 1}, 4, nil},
		{[]int32{1}, 4, nil},
		// A run: the overlapping occurrence proposes what is left of it.
		{[]int32{4, 4, 4, 4}, 4, []int32{4}},
	} {
		if got := lookup(tc.toks, tc.max, nil); !slices.Equal(got, tc.want) {
			t.Errorf("lookup(%v, %d) = %v, want %v", tc.toks, tc.max, got, tc.want)
		}
	}
}

// TestDraftLength: a draft is as long as its tokens' chance of being
// accepted exceeds the threshold, and a source that does not pay is
// probed with a short draft once in a while.
func TestDraftLength(t *testing.T) {
	t.Parallel()
	d := newDrafter()
	for range 20 {
		d.last = srcContext
		d.verified(8, 8) // accepted whole: α near 1
		d.last = srcGrammar
		d.verified(4, 0) // rejected at once: α near 0
	}
	if a := d.alpha(srcContext); a < 0.9 {
		t.Fatalf("context α %.2f after drafts accepted whole", a)
	}
	if n := d.length(srcContext, 0.5, 8); n != 8 {
		t.Fatalf("context at 0.5: %d tokens, want 8", n)
	}
	if n := d.length(srcContext, 0.95, 8); n < 1 || n > 4 {
		t.Fatalf("context at 0.95: %d tokens, want a few", n)
	}
	if n := d.length(srcGrammar, 0.2, 8); n != 0 {
		t.Fatalf("grammar at 0.2 with α %.2f: %d tokens, want none", d.alpha(srcGrammar), n)
	}
	d.src[srcGrammar].idle = probeEvery
	if n := d.length(srcGrammar, 0.2, 8); n != probeLen {
		t.Fatalf("an idle source: %d tokens, want a probe of %d", n, probeLen)
	}
}

// draftJob is a request for runDrafts.
type draftJob struct {
	prompt   []int32
	max      int
	sampling sample.Params
	noDrafts bool
	format   *contracts.ResponseFormat
	tools    []contracts.Tool
}

// runDrafts runs jobs at once through s and returns their results and
// stats in order.
func runDrafts(t *testing.T, l *engine.Loaded, s *Scheduler, jobs []draftJob) ([]*engine.Result, []Stats) {
	t.Helper()
	res, stats := make([]*engine.Result, len(jobs)), make([]Stats, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		req := &engine.Request{PromptIDs: j.prompt, MaxTokens: j.max, Sampling: j.sampling, NoDrafts: j.noDrafts}
		if j.format != nil || j.tools != nil {
			set, err := tools.Compile(j.tools, j.format, l.Tokenizer, tools.Budget{})
			if err != nil {
				t.Fatal(err)
			}
			req.Tools = set.NewRun()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], stats[i], errs[i] = s.Generate(context.Background(), req, JobOpts{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	return res, stats
}

// copyJobs are stories260K jobs whose prompts hold their own continuation:
// each reference prompt, its greedy output, and the prompt again, so a
// model that repeats itself copies from its context.
func copyJobs(t *testing.T) []draftJob {
	var jobs []draftJob
	for _, c := range modeltest.StoriesReference(t).Cases {
		p := slices.Concat(c.PromptIDs, c.GeneratedIDs, c.PromptIDs[1:])
		jobs = append(jobs, draftJob{prompt: p, max: 48})
		jobs = append(jobs, draftJob{prompt: c.PromptIDs, max: len(c.GeneratedIDs)})
	}
	return jobs
}

// TestDraftsKeepOutputs: with drafts the outputs are the tokens decoding
// without them gives, greedy and seeded, alone and batched, with jobs that
// do not draft beside jobs that do, and under preemption (swapped out or
// dropped and recomputed); and drafts are verified and accepted, so the
// jobs take fewer forward passes than tokens.
func TestDraftsKeepOutputs(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	base := copyJobs(t)
	var jobs []draftJob
	for i, j := range base {
		jobs = append(jobs, j)
		j.sampling = sample.Params{Temperature: 0.8, TopP: 0.95, Seed: uint64(i + 1)}
		jobs = append(jobs, j)
	}
	off := newSched(t, l, small(Config{NoDrafts: true}))
	want, _ := runDrafts(t, l, off, jobs)
	for _, tc := range []struct {
		name    string
		cfg     Config
		mix     bool // every third job does not draft
		preempt bool // jobs are preempted (mid-draft too) and resumed
	}{
		{"batched", Config{}, false, false},
		{"mixed with jobs that do not draft", Config{}, true, false},
		{"small prefill chunks", Config{MaxBatchTokens: 7}, false, false},
		{"swap out and in", Config{KVBlocks: 24, MaxBatchTokens: 64, HostSwapMB: 64, RunQuantum: 1}, false, true},
		{"drop and recompute", Config{KVBlocks: 24, MaxBatchTokens: 64, HostSwapMB: -1, RunQuantum: 1}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := slices.Clone(jobs)
			if tc.mix {
				for i := range js {
					js[i].noDrafts = i%3 == 0
				}
			}
			s := newSched(t, l, small(withDrafts(tc.cfg)))
			got, stats := runDrafts(t, l, s, js)
			var drafted, accepted, steps, tokens, preempted int
			for i := range js {
				preempted += stats[i].Preemptions
				if !slices.Equal(got[i].OutputIDs, want[i].OutputIDs) {
					t.Fatalf("job %d (%+v): with drafts %v\nwithout %v", i, js[i].sampling, got[i].OutputIDs, want[i].OutputIDs)
				}
				if js[i].noDrafts && stats[i].DraftedTokens > 0 {
					t.Fatalf("job %d asked for no drafts and drafted %d tokens", i, stats[i].DraftedTokens)
				}
				drafted += stats[i].DraftedTokens
				accepted += stats[i].AcceptedDraftTokens
				steps += stats[i].SampleSteps
				tokens += len(got[i].OutputIDs)
			}
			t.Logf("%d tokens in %d sampling passes; %d drafted, %d accepted; %d preemptions", tokens, steps, drafted, accepted, preempted)
			if tc.preempt && preempted == 0 {
				t.Fatal("no job was preempted")
			}
			if accepted == 0 || steps >= tokens {
				t.Fatalf("drafts did not save a pass: %d tokens in %d passes, %d of %d drafted accepted", tokens, steps, accepted, drafted)
			}
			checkIdle(t, s)
		})
	}
}

// TestDraftsThroughRetries: a retry_on_fail tool restarts generations
// at their end, after drafts were accepted in the same step; the outputs
// (retries included) are decoding's without drafts, and the scheduler's
// blocks add up at the end.
func TestDraftsThroughRetries(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	retry := contracts.Tool{Name: contracts.ToolRetryOnFail, Mode: contracts.ToolModeSoft,
		Params: map[string]json.RawMessage{"output_contains": json.RawMessage(`["a"]`), "max_retries": json.RawMessage(`2`)}}
	var jobs []draftJob
	for _, j := range copyJobs(t) {
		j.max, j.tools = 40, []contracts.Tool{retry}
		jobs = append(jobs, j)
	}
	want, _ := runDrafts(t, l, newSched(t, l, small(Config{NoDrafts: true})), jobs)
	on := newSched(t, l, small(withDrafts(Config{})))
	got, stats := runDrafts(t, l, on, jobs)
	var retries, accepted int
	for i := range jobs {
		if !slices.Equal(got[i].OutputIDs, want[i].OutputIDs) || got[i].Retries != want[i].Retries {
			t.Fatalf("job %d: with drafts %v (%d retries)\nwithout %v (%d)", i, got[i].OutputIDs, got[i].Retries, want[i].OutputIDs, want[i].Retries)
		}
		retries += got[i].Retries
		accepted += stats[i].AcceptedDraftTokens
	}
	if retries == 0 || accepted == 0 {
		t.Fatalf("%d retries, %d draft tokens accepted: the case is not exercised", retries, accepted)
	}
	checkIdle(t, on)
}

// TestDraftsUnderConstraints: a constrained job applies its mask at every
// verified position. The prompts repeat text with punctuation and
// capitals that the context drafts propose and the regex forbids; the
// outputs match the pattern and equal decoding without drafts.
func TestDraftsUnderConstraints(t *testing.T) {
	t.Parallel()
	l := modeltest.LoadStories(t, 1)
	const pattern = `[a-z ]{1,200}`
	lower := &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: pattern}
	schema := &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(
		`{"type":"object","properties":{"story":{"type":"string","maxLength":80},"mood":{"enum":["happy","sad"]}},"required":["story","mood"]}`)}
	var jobs []draftJob
	for _, j := range copyJobs(t) {
		j.max = 60
		j.format = lower
		jobs = append(jobs, j)
		j.format = schema
		jobs = append(jobs, j)
	}
	off := newSched(t, l, small(Config{NoDrafts: true}))
	want, _ := runDrafts(t, l, off, jobs)
	on := newSched(t, l, small(withDrafts(Config{})))
	got, stats := runDrafts(t, l, on, jobs)
	re := regexp.MustCompile(`^(?:` + pattern + `)$`)
	var drafted int
	var tokens, steps, accepted [2]int // regex, schema
	for i, j := range jobs {
		k := i % 2
		tokens[k] += len(got[i].OutputIDs)
		steps[k] += stats[i].SampleSteps
		accepted[k] += stats[i].AcceptedDraftTokens
		if !slices.Equal(got[i].OutputIDs, want[i].OutputIDs) {
			t.Fatalf("job %d: with drafts %q\nwithout %q", i, got[i].Text, want[i].Text)
		}
		if j.format == lower && got[i].StopReason != engine.StopMaxTokens && !re.MatchString(got[i].Text) {
			t.Fatalf("job %d: %q does not match %s", i, got[i].Text, pattern)
		}
		if j.format == schema && got[i].StopReason == engine.StopConstraint && !json.Valid([]byte(got[i].Text)) {
			t.Fatalf("job %d: %q is not JSON", i, got[i].Text)
		}
		drafted += stats[i].DraftedTokens
	}
	t.Logf("regex: %d tokens in %d passes (%d accepted); schema: %d tokens in %d passes (%d accepted)", tokens[0], steps[0], accepted[0], tokens[1], steps[1], accepted[1])
	if drafted == 0 {
		t.Fatal("no job drafted: the masks at verified positions were not exercised")
	}
	checkIdle(t, on)
}

// withDrafts is cfg with drafts fed whenever a source proposes them (a
// low threshold), so that the tests draft on any machine.
func withDrafts(cfg Config) Config {
	cfg.DraftThreshold = 0.01
	return cfg
}

// small is cfg in a small arena and host tier where it sets neither:
// the drafts tests run several schedulers at once, and under the race
// detector each default arena and tier costs gigabytes.
func small(cfg Config) Config {
	if cfg.KVBlocks == 0 && cfg.KVMemoryMB == 0 {
		cfg.KVMemoryMB = 16
	}
	if cfg.HostSwapMB == 0 {
		cfg.HostSwapMB = 16
	}
	return cfg
}
