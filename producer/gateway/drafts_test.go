package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// TestGatewayDrafts: through the gateway, NATS and a worker, a job under a
// JSON schema drafts (usage counts drafted and accepted tokens) and
// answers exactly what the same job with speculation "off" answers, on the
// native API and the OpenAI one; a mode that is not one is refused.
func TestGatewayDrafts(t *testing.T) {
	t.Parallel()
	// Drafts fed whenever proposed, whatever this machine's step times.
	f := newGatewayWith(t, sched.Config{DraftThreshold: 0.01})
	ctx := context.Background()
	const schema = `{"type":"object","properties":{"hero":{"type":"string","maxLength":24},"mood":{"enum":["happy","sad","sleepy"]},"friends":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":2}},"required":["hero","mood","friends"],"additionalProperties":false}`
	job := func(spec string) string {
		return fmt.Sprintf(`{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time there was a girl named Lily. Lily was happy."}],"max_tokens":80,"temperature":0,"speculation":%q,"response_format":{"type":"json_schema","schema":%s}}`, spec, schema)
	}
	results := map[string]contracts.Result{}
	for _, spec := range []string{"auto", "off", ""} {
		resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", job(spec))
		if resp.StatusCode != 202 {
			t.Fatalf("speculation %q: %d %s", spec, resp.StatusCode, body)
		}
		var sub struct{ ID string }
		json.Unmarshal(body, &sub)
		results[spec] = f.waitResult(ctx, sub.ID)
	}
	on, off := results["auto"], results["off"]
	if on.Status != contracts.StatusCompleted || off.Status != contracts.StatusCompleted || !json.Valid([]byte(on.Text)) {
		t.Fatalf("results: %+v\n%+v", on, off)
	}
	if on.Text != off.Text || results[""].Text != on.Text || on.Usage.OutputTokens != off.Usage.OutputTokens {
		t.Fatalf("with drafts %q (%d tokens), without %q (%d)", on.Text, on.Usage.OutputTokens, off.Text, off.Usage.OutputTokens)
	}
	if on.Usage.AcceptedDraftTokens == 0 || on.Usage.AcceptedDraftTokens > on.Usage.DraftedTokens || off.Usage.DraftedTokens != 0 {
		t.Fatalf("usage with drafts %+v, without %+v", on.Usage, off.Usage)
	}
	t.Logf("%q: %d tokens, %d drafted, %d accepted", on.Text, on.Usage.OutputTokens, on.Usage.DraftedTokens, on.Usage.AcceptedDraftTokens)

	if resp, body := f.do(ctx, "POST", "/v1/jobs", "key-acme", job("maybe")); resp.StatusCode != 400 || errorCode(t, body) != contracts.CodeInvalidRequest ||
		!strings.Contains(string(body), "speculation") {
		t.Fatalf("speculation maybe: %d %s", resp.StatusCode, body)
	}

	// The OpenAI API takes it as an extra field.
	chat := func(spec string) string {
		resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", fmt.Sprintf(`{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":60,"temperature":0,"speculation":%q,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":%s}}}`, spec, schema))
		if resp.StatusCode != 200 {
			t.Fatalf("chat speculation %q: %d %s", spec, resp.StatusCode, body)
		}
		var cc struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal(body, &cc); err != nil || len(cc.Choices) != 1 {
			t.Fatalf("chat %s: %v", body, err)
		}
		return cc.Choices[0].Message.Content
	}
	if a, b := chat("auto"), chat("off"); a != b || a == "" {
		t.Fatalf("chat with drafts %q, without %q", a, b)
	}

	// A forced tool call: the call's name and punctuation are forced.
	call := func(spec string) string {
		body := fmt.Sprintf(`{"model":"stories260k","messages":[{"role":"user","content":"What is the weather in Paris?"}],"max_tokens":60,"temperature":0,"speculation":%q,`+
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":%s}},{"type":"function","function":{"name":"get_time","parameters":%s}}],"tool_choice":"required"}`,
			spec, weatherSchema, timeSchema)
		resp, out := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", body)
		if resp.StatusCode != 200 {
			t.Fatalf("tool call speculation %q: %d %s", spec, resp.StatusCode, out)
		}
		var cc struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(out, &cc); err != nil || len(cc.Choices) != 1 || len(cc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("tool call %s: %v", out, err)
		}
		fn := cc.Choices[0].Message.ToolCalls[0].Function
		checkArgs(t, fn.Name, fn.Arguments)
		return fn.Name + " " + fn.Arguments
	}
	if a, b := call("auto"), call("off"); a != b {
		t.Fatalf("tool call with drafts %q, without %q", a, b)
	}
}
