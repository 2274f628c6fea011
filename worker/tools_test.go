package worker_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

func tool(name contracts.ToolName, params map[string]any) contracts.Tool {
	t := contracts.Tool{Name: name, Params: map[string]json.RawMessage{}}
	for k, v := range params {
		b, _ := json.Marshal(v)
		t.Params[k] = b
	}
	return t
}

// TestInlineTools runs jobs with inline tools on the real model through
// both executors: the output obeys every constraint.
func TestInlineTools(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"inorder", "sched"} {
		var x worker.Executor = workertest.NewExecutor(t)
		if name == "sched" {
			x = workertest.NewSchedExecutor(t, sched.Config{})
		}
		run := func(r *contracts.JobRequest) *worker.Outcome {
			t.Helper()
			r.ApplyDefaults(contracts.Limits{})
			out, err := x.Execute(context.Background(), &worker.Job{Request: r, Tenant: "acme"}, sinkFunc(func(string, []int32, []contracts.TokenLogprob) {}))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return out
		}
		temp := 1.5
		// Regex: the whole output matches.
		re := `[a-z ]{3,30}\.`
		r := request("Once upon a time", 40, contracts.PriorityNormal)
		r.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: re}
		out := run(r)
		if out.Err != nil || !regexp.MustCompile(`^(?:`+re+`)$`).MatchString(out.Text) {
			t.Errorf("%s regex: %q (%v, stop %s)", name, out.Text, out.Err, out.StopReason)
		}
		// JSON Schemas: every output parses and validates.
		for i, schema := range []string{
			`{"type":"object","properties":{"name":{"type":"string","maxLength":12}},"required":["name"],"additionalProperties":false}`,
			`{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":120},"happy":{"type":"boolean"}},"required":["age","happy"],"additionalProperties":false}`,
			`{"type":"array","items":{"enum":["cat","dog","bird"]},"minItems":1,"maxItems":3}`,
			`{"type":"object","properties":{"day":{"type":"string","format":"date"},"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":2}},"required":["day"],"additionalProperties":false}`,
		} {
			r = request("Once upon a time", 200, contracts.PriorityNormal)
			r.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(schema)}
			out = run(r)
			sch, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			if err := c.AddResource("s.json", sch); err != nil {
				t.Fatal(err)
			}
			compiled, err := c.Compile("s.json")
			if err != nil {
				t.Fatal(err)
			}
			doc, perr := jsonschema.UnmarshalJSON(strings.NewReader(out.Text))
			if out.Err != nil || perr != nil || compiled.Validate(doc) != nil {
				t.Errorf("%s json schema %d: %q (%v, stop %s)", name, i, out.Text, out.Err, out.StopReason)
			}
		}
		// Banned words never appear, even sampling hot; the suffix is last.
		for seed := uint64(0); seed < 4; seed++ {
			r = request("Once upon a time", 60, contracts.PriorityNormal)
			r.Temperature, r.Seed = &temp, &seed
			r.Tools = []contracts.Tool{tool(contracts.ToolToxicityFilter, map[string]any{"words": []string{"Lily", "park"}}),
				tool(contracts.ToolSuffix, map[string]any{"text": " [generated]"})}
			out = run(r)
			if out.Err != nil || strings.Contains(out.Text, "Lily") || strings.Contains(out.Text, "park") || !strings.HasSuffix(out.Text, " [generated]") {
				t.Errorf("%s toxicity+suffix seed %d: %q (%v)", name, seed, out.Text, out.Err)
			}
			if out.Usage.ToolExecutionTimeMs <= 0 || len(out.ToolReport) != 2 {
				t.Errorf("%s: tool time %v, report %+v", name, out.Usage.ToolExecutionTimeMs, out.ToolReport)
			}
		}
		// Tools declared in the system prompt are parsed out of it.
		r = request("Once upon a time", 20, contracts.PriorityNormal)
		r.System = `<tool name="suffix"><param name="text">THE END</param></tool>`
		out = run(r)
		if out.Err != nil || !strings.HasSuffix(out.Text, "THE END") {
			t.Errorf("%s inline system tool: %q (%v)", name, out.Text, out.Err)
		}
	}
}
