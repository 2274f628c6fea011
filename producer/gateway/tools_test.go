package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/zerolayer/zerolayer/contracts"
)

// The tools of the tool call tests: small schemas, so that a constrained
// call completes well within max_tokens; get_time's has a local $ref.
const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`
	timeSchema    = `{"$defs":{"zone":{"enum":["UTC","CET"]}},"type":"object","properties":{"zone":{"$ref":"#/$defs/zone"}},"required":["zone"],"additionalProperties":false}`
)

var toolSchemas = map[string]string{"get_weather": weatherSchema, "get_time": timeSchema}

// checkArgs fails t unless args is JSON valid against tool's schema.
func checkArgs(t *testing.T, tool, args string) {
	t.Helper()
	raw, ok := toolSchemas[tool]
	if !ok {
		t.Fatalf("call of an unknown tool %q", tool)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("tool.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		t.Fatalf("%s arguments %q are not JSON: %v", tool, args, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("%s arguments %s: %v", tool, args, err)
	}
}

func schemaMap(t *testing.T, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func openaiTools(t *testing.T, names ...string) []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, n := range names {
		out = append(out, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: n,
			Description: openai.String("Looks up " + strings.TrimPrefix(n, "get_") + "."), Parameters: schemaMap(t, toolSchemas[n])}))
	}
	return out
}

func anthropicTools(t *testing.T, names ...string) []anthropic.ToolUnionParam {
	var out []anthropic.ToolUnionParam
	for _, n := range names {
		m := schemaMap(t, toolSchemas[n])
		var req []string
		for _, r := range m["required"].([]any) {
			req = append(req, r.(string))
		}
		extra := map[string]any{"additionalProperties": false}
		if d, ok := m["$defs"]; ok {
			extra["$defs"] = d
		}
		tool := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: m["properties"], Required: req, ExtraFields: extra}, n)
		tool.OfTool.Description = anthropic.String("Looks up " + strings.TrimPrefix(n, "get_") + ".")
		out = append(out, tool)
	}
	return out
}

// TestSDKToolsOpenAI: function calling through the OpenAI SDK. A forced
// call (a named function, required) is valid for its tool's schema by
// construction, plain and streamed; auto answers text or a valid call;
// none answers text; a call cut short by max_tokens ends with length; the
// tool turns of a second request are accepted; bad tools are refused.
func TestSDKToolsOpenAI(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	oc := f.openaiClient("key-acme")
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
	named := openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	params := func(choice openai.ChatCompletionToolChoiceOptionUnionParam, max int64, names ...string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "stories260k", MaxTokens: openai.Int(max), Messages: user,
			Tools: openaiTools(t, names...), ToolChoice: choice, ParallelToolCalls: openai.Bool(false)}
	}

	// A named function.
	cc, err := oc.Chat.Completions.New(ctx, params(named, 128, "get_weather", "get_time"))
	if err != nil {
		t.Fatal(err)
	}
	ch := cc.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
		t.Fatalf("named function: %+v", ch)
	}
	answer, call := ch.Message, ch.Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Type != "function" || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("named function: call %+v", call)
	}
	checkArgs(t, call.Function.Name, call.Function.Arguments)
	if !strings.Contains(ch.Message.RawJSON(), `"content":null`) {
		t.Errorf("a call's content is not null: %s", ch.Message.RawJSON())
	}

	// Streamed: the call's head, then its arguments in pieces.
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		tools  []string
	}{
		{"named", named, []string{"get_weather"}},
		{"required of two", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, []string{"get_weather", "get_time"}},
	} {
		stream := oc.Chat.Completions.NewStreaming(ctx, params(tc.choice, 128, tc.tools...))
		var acc openai.ChatCompletionAccumulator
		argDeltas := 0
		for stream.Next() {
			chunk := stream.Current()
			acc.AddChunk(chunk)
			if len(chunk.Choices) > 0 && len(chunk.Choices[0].Delta.ToolCalls) > 0 && chunk.Choices[0].Delta.ToolCalls[0].Function.Arguments != "" {
				argDeltas++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s streamed: %v", tc.name, err)
		}
		ch := acc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || argDeltas == 0 {
			t.Fatalf("%s streamed: %d argument deltas, %+v", tc.name, argDeltas, ch)
		}
		call := ch.Message.ToolCalls[0]
		if call.ID != "call_"+acc.ID {
			t.Errorf("%s streamed: call id %q", tc.name, call.ID)
		}
		checkArgs(t, call.Function.Name, call.Function.Arguments)
	}

	// required with two tools: one call of either, valid.
	for i := 0; i < 3; i++ {
		cc, err := oc.Chat.Completions.New(ctx, params(openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, 128, "get_weather", "get_time"))
		if err != nil {
			t.Fatal(err)
		}
		ch := cc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
			t.Fatalf("required: %+v", ch)
		}
		checkArgs(t, ch.Message.ToolCalls[0].Function.Name, ch.Message.ToolCalls[0].Function.Arguments)
	}

	// auto: text, or a valid call; streamed the same.
	for seed := int64(0); seed < 6; seed++ {
		p := params(openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, 96, "get_weather", "get_time")
		p.Seed = openai.Int(seed)
		cc, err := oc.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ch := cc.Choices[0]
		switch {
		case len(ch.Message.ToolCalls) == 1 && ch.FinishReason == "tool_calls":
			checkArgs(t, ch.Message.ToolCalls[0].Function.Name, ch.Message.ToolCalls[0].Function.Arguments)
		case len(ch.Message.ToolCalls) == 0 && (ch.FinishReason == "stop" || ch.FinishReason == "length"):
			if strings.HasPrefix(ch.Message.Content, "<tool_call>") {
				t.Fatalf("auto: text starting with the trigger: %q", ch.Message.Content)
			}
		case len(ch.Message.ToolCalls) == 1 && ch.FinishReason == "length":
			// A call cut short by max_tokens.
		default:
			t.Fatalf("auto: %+v", ch)
		}
		stream := oc.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if sc := acc.Choices[0]; sc.FinishReason != ch.FinishReason || sc.Message.Content != ch.Message.Content || len(sc.Message.ToolCalls) != len(ch.Message.ToolCalls) {
			t.Errorf("auto seed %d: streamed %+v, plain %+v", seed, sc, ch)
		}
	}

	// none: the tools are ignored.
	cc, err = oc.Chat.Completions.New(ctx, params(openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}, 12, "get_weather"))
	if err != nil {
		t.Fatal(err)
	}
	if ch := cc.Choices[0]; len(ch.Message.ToolCalls) != 0 || ch.Message.Content == "" || ch.FinishReason != "length" {
		t.Fatalf("none: %+v", ch)
	}

	// Cut short by max_tokens: the arguments so far, finish_reason length.
	cc, err = oc.Chat.Completions.New(ctx, params(named, 3, "get_weather"))
	if err != nil {
		t.Fatal(err)
	}
	if ch := cc.Choices[0]; ch.FinishReason != "length" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" ||
		json.Valid([]byte(ch.Message.ToolCalls[0].Function.Arguments)) {
		t.Fatalf("cut short: %+v", ch)
	}

	// The second turn: the call and its result sent back.
	second := params(openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, 16, "get_weather")
	second.Messages = append(append(user, answer.ToParam()), openai.ToolMessage(`{"sky":"sunny"}`, call.ID))
	if _, err := oc.Chat.Completions.New(ctx, second); err != nil {
		t.Fatalf("second turn: %v", err)
	}

	// Bad tools.
	bad := func(name string, p openai.ChatCompletionNewParams, code contracts.Code, want string) {
		t.Helper()
		_, err := oc.Chat.Completions.New(ctx, p)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Code != string(code) || !strings.Contains(oe.Message, want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p := params(named, 16, "get_weather", "get_weather")
	bad("duplicate names", p, contracts.CodeInvalidRequest, "two tools")
	p = params(named, 16, "get_weather")
	p.Tools[0].OfFunction.Function.Parameters = openai.FunctionParameters{"type": "thing"}
	bad("bad schema", p, contracts.CodeInvalidSchema, `tool "get_weather"`)
	p = params(named, 16, "get_weather")
	p.Tools[0].OfFunction.Function.Name = ""
	bad("no name", p, contracts.CodeInvalidRequest, "tools[0].function.name")
	bad("unknown tool", params(named, 16, "get_time"), contracts.CodeInvalidRequest, `"get_weather", which is not in tools`)
	p = params(named, 16, "get_weather")
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}}
	bad("tools and a response format", p, contracts.CodeInvalidRequest, "response format")
}

// TestSDKToolsAnthropic: tool use through the Anthropic SDK: tool and any
// choices, plain and streamed (Accumulate), give a tool_use block whose
// input is valid for its input_schema and stop_reason tool_use; the tool
// turns of a second request are accepted; bad tools are refused.
func TestSDKToolsAnthropic(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	ac := f.anthropicClient("key-acme")
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	params := func(choice anthropic.ToolChoiceUnionParam, max int64, names ...string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "stories260k", MaxTokens: max, Messages: user, Tools: anthropicTools(t, names...), ToolChoice: choice}
	}
	tool := anthropic.ToolChoiceParamOfTool("get_weather")
	tool.OfTool.DisableParallelToolUse = anthropic.Bool(true)
	anyTool := anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	check := func(name string, msg *anthropic.Message) anthropic.ToolUseBlock {
		t.Helper()
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" {
			t.Fatalf("%s: %+v", name, msg)
		}
		use := msg.Content[0].AsToolUse()
		if !strings.HasPrefix(use.ID, "toolu_") {
			t.Errorf("%s: tool_use id %q", name, use.ID)
		}
		checkArgs(t, use.Name, string(use.Input))
		return use
	}
	var first anthropic.Message
	for _, tc := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		tools  []string
	}{
		{"tool", tool, []string{"get_time", "get_weather"}},
		{"any", anyTool, []string{"get_weather", "get_time"}},
	} {
		msg, err := ac.Messages.New(ctx, params(tc.choice, 128, tc.tools...))
		if err != nil {
			t.Fatal(err)
		}
		use := check(tc.name, msg)
		if tc.name == "tool" {
			if use.Name != "get_weather" {
				t.Fatalf("tool: called %q", use.Name)
			}
			first = *msg
		}
		stream := ac.Messages.NewStreaming(ctx, params(tc.choice, 128, tc.tools...))
		var acc anthropic.Message
		deltas := 0
		for stream.Next() {
			ev := stream.Current()
			if err := acc.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
				deltas++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s streamed: %v", tc.name, err)
		}
		if deltas == 0 {
			t.Errorf("%s streamed: no input_json_delta", tc.name)
		}
		if use := check(tc.name+" streamed", &acc); use.ID != "toolu_"+strings.TrimPrefix(acc.ID, "msg_") {
			t.Errorf("%s streamed: tool_use id %q in message %q", tc.name, use.ID, acc.ID)
		}
	}

	// auto: text, or a valid call.
	for i := 0; i < 4; i++ {
		msg, err := ac.Messages.New(ctx, params(anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}, 96, "get_weather", "get_time"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case msg.StopReason == anthropic.StopReasonToolUse:
			check("auto", msg)
		case len(msg.Content) == 1 && msg.Content[0].Type == "text":
			if strings.HasPrefix(msg.Content[0].Text, "<tool_call>") {
				t.Fatalf("auto: text starting with the trigger: %q", msg.Content[0].Text)
			}
		case msg.StopReason == anthropic.StopReasonMaxTokens:
		default:
			t.Fatalf("auto: %+v", msg)
		}
	}

	// none: text.
	msg, err := ac.Messages.New(ctx, params(anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}, 12, "get_weather"))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Fatalf("none: %+v", msg)
	}

	// Cut short: input {} and stop_reason max_tokens.
	msg, err = ac.Messages.New(ctx, params(tool, 3, "get_weather"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonMaxTokens || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || string(msg.Content[0].Input) != "{}" {
		t.Fatalf("cut short: %+v", msg)
	}

	// The second turn: the call and its result sent back.
	use := first.Content[0].AsToolUse()
	second := params(anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}, 16, "get_weather")
	second.Messages = append(append(user, first.ToParam()), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny", false)))
	if _, err := ac.Messages.New(ctx, second); err != nil {
		t.Fatalf("second turn: %v", err)
	}

	// Bad tools.
	bad := func(name string, p anthropic.MessageNewParams, want string) {
		t.Helper()
		_, err := ac.Messages.New(ctx, p)
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad("duplicate names", params(tool, 16, "get_weather", "get_weather"), "two tools")
	bad("unknown tool", params(tool, 16, "get_time"), `"get_weather", which is not in tools`)
	p := params(tool, 16, "get_weather")
	p.Tools[0].OfTool.InputSchema.Properties = map[string]any{"city": map[string]any{"type": 7}}
	bad("bad schema", p, `tool "get_weather"`)
	p = params(tool, 16, "get_weather")
	p.Tools[0].OfTool.Name = "get weather"
	bad("bad name", p, "tools[0].name")
	bad("no tools", params(anyTool, 16), "no tools")
}
