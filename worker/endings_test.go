package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestIncompleteOutputEndToEnd: a job whose max_tokens comes inside its
// constraint completes with stop_reason max_tokens and an incomplete
// output (result and final event), not a tool error; its text is valid
// UTF-8 and is what the deltas carried.
func TestIncompleteOutputEndToEnd(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rf   *contracts.ResponseFormat
		max  int
	}{
		// stories260K spells these letters in byte tokens: the budget
		// ends inside one (checked below).
		{"greek", &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: `\p{Greek}+`}, 2},
		{"json", &contracts.ResponseFormat{Type: contracts.FormatJSONSchema,
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}, 12},
	} {
		r := greedy("Once upon a time", tc.max, contracts.PriorityNormal)
		r.ResponseFormat = tc.rf
		id, err := b.Client.Submit(ctx, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := wait(t, b.Client, id)
		if res.Status != contracts.StatusCompleted || res.StopReason != contracts.StopMaxTokens || res.Error != nil {
			t.Fatalf("%s: status %s, stop %s, error %v", tc.name, res.Status, res.StopReason, res.Error)
		}
		if !res.Incomplete || !strings.Contains(res.IncompleteReason, "before the constraint was satisfied") || res.Attempts != 1 {
			t.Errorf("%s: incomplete %v %q, attempts %d", tc.name, res.Incomplete, res.IncompleteReason, res.Attempts)
		}
		if !utf8.ValidString(res.Text) || len(res.TokenIDs) != tc.max || res.Usage.OutputTokens != tc.max {
			t.Errorf("%s: text %q, %d tokens, usage %d", tc.name, res.Text, len(res.TokenIDs), res.Usage.OutputTokens)
		}
		if tc.name == "greek" {
			if !strings.Contains(res.IncompleteReason, "UTF-8 character") {
				t.Errorf("greek: reason %q does not name the cut character", res.IncompleteReason)
			}
			for _, c := range res.Text {
				if !unicode.Is(unicode.Greek, c) {
					t.Errorf("greek: %q", res.Text)
				}
			}
		}
		text, final := checkEvents(t, events(t, b.Client, id))
		if final.Type != contracts.EventFinal || !final.Incomplete || final.IncompleteReason != res.IncompleteReason || final.Attempts != 1 || text != res.Text {
			t.Errorf("%s: final %+v, deltas %q", tc.name, final, text)
		}
	}
}

// TestRetriesBilledEndToEnd: a retry_on_fail job at temperature 0 runs
// two attempts that differ; the result says attempts 2, and usage counts
// both attempts' tokens on ZL_USAGE and in the billing ledger, which
// prices them.
func TestRetriesBilledEndToEnd(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t) // skips without Postgres
	b := workertest.Setup(t, contracts.StreamsConfig{})
	startBilling(t, pool, b)
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	ctx := context.Background()
	plain := greedy("Once upon a time", 40, contracts.PriorityNormal)
	id, err := b.Client.Submit(ctx, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := wait(t, b.Client, id)
	words := strings.Fields(first.Text)
	if first.Status != contracts.StatusCompleted || len(words) < 6 {
		t.Fatalf("greedy job: %+v", first)
	}
	marker := " " + words[len(words)/2]
	r := greedy("Once upon a time", 40, contracts.PriorityNormal)
	r.Tools = []contracts.Tool{tool(contracts.ToolRetryOnFail, map[string]any{"output_contains": []string{marker}, "max_retries": 1})}
	r.Tools[0].Mode = contracts.ToolModeSoft // a retry that says it again is reported, not failed
	id, err = b.Client.Submit(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, b.Client, id)
	if res.Status != contracts.StatusCompleted || res.Attempts != 2 {
		t.Fatalf("retry job: status %s, attempts %d, error %v", res.Status, res.Attempts, res.Error)
	}
	if res.Text == first.Text {
		t.Fatalf("the temperature-0 retry repeated the failed attempt: %q", res.Text)
	}
	if !strings.HasPrefix(res.Text, first.Text[:strings.Index(first.Text, marker)]) {
		t.Errorf("retry %q lost the failed attempt's prefix before %q (%q)", res.Text, marker, first.Text)
	}
	want := len(first.TokenIDs) + len(res.TokenIDs)
	if u := res.Usage; u.OutputTokens != want || u.RetriedOutputTokens != len(first.TokenIDs) {
		t.Fatalf("usage output_tokens %d (retried %d), want %d (retried %d)", u.OutputTokens, u.RetriedOutputTokens, want, len(first.TokenIDs))
	}
	_, final := checkEvents(t, events(t, b.Client, id))
	if final.Attempts != 2 || final.Usage.OutputTokens != want {
		t.Errorf("final event: attempts %d, usage %+v", final.Attempts, final.Usage)
	}
	var onStream *contracts.Usage
	for _, m := range workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme")) {
		u, err := contracts.DecodeUsage(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		if u.JobID == id {
			onStream = &u
		}
	}
	if onStream == nil || onStream.OutputTokens != want || onStream.RetriedOutputTokens != len(first.TokenIDs) {
		t.Fatalf("usage record on ZL_USAGE: %+v", onStream)
	}
	// The ledger stores and prices every attempt's tokens.
	var stored int
	var priced bool
	natstest.Until(t, 30*time.Second, "the retry job charged", func() bool {
		err := pool.QueryRow(ctx, `SELECT u.output_tokens, c.cost_output = u.output_tokens * 0.000015
			FROM usage u JOIN charges c USING (job_id) WHERE u.job_id = $1`, id).Scan(&stored, &priced)
		return err == nil
	})
	if stored != want || !priced {
		t.Fatalf("ledger: output_tokens %d (want %d), cost_output priced on them: %v", stored, want, priced)
	}
}

// TestToolParamsAndRedactionEndToEnd: bad tool parameters are refused with
// their path, at submit and by the worker for tools declared in the system
// prompt; the suffix is redacted like the rest of the output.
func TestToolParamsAndRedactionEndToEnd(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	ctx := context.Background()
	for _, tc := range []struct {
		tool  contracts.Tool
		field string
	}{
		{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"dog"}, "mode": "shout"}), "tools[0].params.mode"},
		{tool(contracts.ToolSuffix, map[string]any{"text": "!", "foo": 1}), "tools[0].params.foo"},
	} {
		r := greedy("Once upon a time", 8, contracts.PriorityNormal)
		r.Tools = []contracts.Tool{tc.tool}
		_, err := b.Client.Submit(ctx, r, nil)
		var ve *contracts.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != tc.field || ve.Problems[0].Code != contracts.CodeInvalidRequest {
			t.Errorf("%s: submit error %v, want invalid_request at %s", tc.tool.Name, err, tc.field)
		}
	}
	// Declared in the system prompt, the tool is checked at submit too,
	// and the error points into the system prompt.
	r := greedy("Once upon a time", 8, contracts.PriorityNormal)
	r.Tools = []contracts.Tool{tool(contracts.ToolSuffix, map[string]any{"text": "!"})}
	r.System = `<tool name="toxicity_filter"><param name="words">dog</param><param name="mode">shout</param></tool>`
	_, err := b.Client.Submit(ctx, r, nil)
	var ve *contracts.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != "system.tools[0].params.mode" {
		t.Errorf("system-prompt tool with a bad mode: submit error %v, want one at system.tools[0].params.mode", err)
	}
	// The suffix goes through the redactor.
	r = greedy("Once upon a time", 10, contracts.PriorityNormal)
	r.Tools = []contracts.Tool{
		tool(contracts.ToolSuffix, map[string]any{"text": " -- write to john.doe@example.com"}),
		tool(contracts.ToolPIIRedactor, nil),
	}
	id, err := b.Client.Submit(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, b.Client, id)
	if res.Status != contracts.StatusCompleted || !strings.HasSuffix(res.Text, " -- write to [EMAIL]") || strings.Contains(res.Text, "john.doe") {
		t.Fatalf("suffix not redacted: %q (%v)", res.Text, res.Error)
	}
	text, _ := checkEvents(t, events(t, b.Client, id))
	if text != res.Text {
		t.Errorf("deltas %q, result %q", text, res.Text)
	}
}
