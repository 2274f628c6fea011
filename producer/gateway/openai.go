package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// textContent reads a message content that is a string or a list of text
// parts ({"type": "text", "text": …}), as both compatible APIs allow. The
// Messages API's tool turns are rendered as text (see renderCall and
// renderResult): a tool_use part as the call the model made, a
// tool_result part (its content a string or text parts) as the result.
func textContent(raw json.RawMessage, where string) (string, *contracts.Error) {
	var s string
	if len(raw) == 0 {
		return "", nil // absent: an assistant message with tool calls only
	}
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", contracts.NewError(contracts.CodeInvalidRequest, "%s: want a string or a list of text parts", where)
	}
	var sb strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text":
			sb.WriteString(p.Text)
		case "tool_use":
			lineBreak(&sb)
			sb.WriteString(renderCall(p.Name, string(p.Input)))
		case "tool_result":
			var text string
			if len(p.Content) > 0 && string(p.Content) != "null" {
				var e *contracts.Error
				if text, e = textContent(p.Content, fmt.Sprintf("%s[%d].content", where, i)); e != nil {
					return "", e
				}
			}
			lineBreak(&sb)
			sb.WriteString(renderResult(p.ToolUseID, text, p.IsError))
		default:
			return "", contracts.NewError(contracts.CodeInvalidRequest, "%s[%d]: part type %q; only text, tool_use and tool_result are supported", where, i, p.Type)
		}
	}
	return sb.String(), nil
}

// lineBreak starts a new line in sb, unless it is empty or one is started.
func lineBreak(sb *strings.Builder) {
	if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
		sb.WriteString("\n")
	}
}

// renderCall is a tool call made in an earlier turn, as text: the trigger
// and the call object, as the model writes a call under tool_choice auto
// (<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}).
// Arguments that are not JSON are written as a JSON string.
func renderCall(name, arguments string) string {
	args := json.RawMessage(arguments)
	if !json.Valid(args) {
		args, _ = json.Marshal(arguments)
	}
	b, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{name, args})
	return toolTrigger + string(b)
}

// renderResult is a tool's result sent back by the client, as text:
// <tool_result id="call_…">the result</tool_result> (with error="true"
// when the client marks it an error).
func renderResult(id, content string, isError bool) string {
	attrs := fmt.Sprintf(" id=%q", id)
	if isError {
		attrs += ` error="true"`
	}
	return "<tool_result" + attrs + ">" + content + "</tool_result>"
}

// chatRequest is the part of an OpenAI chat completions request the
// gateway maps to a job; other fields are ignored, except the ones that
// would change the answer and are not supported, which are refused.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []compatMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Logprobs    bool              `json:"logprobs"`
	TopLogprobs *int              `json:"top_logprobs"`
	N           *int              `json:"n"`
	Tools       json.RawMessage   `json:"tools"`
	Metadata    map[string]string `json:"metadata"`

	// ToolChoice is none, auto, required, or {"type": "function",
	// "function": {"name": …}}; ParallelToolCalls is accepted, but an
	// answer makes at most one call.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`

	// The thinking switch, as the servers of open models take it:
	// chat_template_kwargs.enable_thinking (vLLM, SGLang) or
	// reasoning_effort ("none" off; "minimal", "low", "medium", "high"
	// on). The reasoning comes back in message.reasoning_content.
	ChatTemplateKwargs *struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
	ReasoningEffort string `json:"reasoning_effort"`

	// Speculation is zerolayer's: "off" decodes without drafts (the same
	// output, in a pass a token), "auto" or absent the worker's default.
	Speculation contracts.Speculation `json:"speculation"`
	// WaitForModel is zerolayer's (contracts.JobRequest.WaitForModel):
	// queue the job for a worker of its model yet to start instead of an
	// unknown_model error while no live worker serves it.
	WaitForModel bool `json:"wait_for_model"`
}

// thinking is the request's thinking switch; nil leaves the model's
// default.
func (cr *chatRequest) thinking() (*contracts.Thinking, *contracts.Error) {
	var on *bool
	switch cr.ReasoningEffort {
	case "":
	case "none":
		on = new(bool)
	case "minimal", "low", "medium", "high":
		on = new(bool)
		*on = true
	default:
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "reasoning_effort %q: want none, minimal, low, medium or high", cr.ReasoningEffort)
	}
	if k := cr.ChatTemplateKwargs; k != nil && k.EnableThinking != nil {
		if on != nil && *on != *k.EnableThinking {
			return nil, contracts.NewError(contracts.CodeInvalidRequest, "reasoning_effort %q and chat_template_kwargs.enable_thinking %v disagree", cr.ReasoningEffort, *k.EnableThinking)
		}
		on = k.EnableThinking
	}
	if on == nil {
		return nil, nil
	}
	if *on {
		return &contracts.Thinking{Type: contracts.ThinkingEnabled}, nil
	}
	return &contracts.Thinking{Type: contracts.ThinkingDisabled}, nil
}

// toolChoice reads the tools and the tool choice: the mode (auto when
// there are tools and no choice) and, for a named function, its name.
func (cr *chatRequest) toolChoice() ([]toolDef, string, string, *contracts.Error) {
	var tools []toolDef
	if len(cr.Tools) > 0 && string(cr.Tools) != "null" {
		var raw []struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(cr.Tools, &raw); err != nil {
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tools: want a list of {\"type\": \"function\", \"function\": {name, description, parameters}}: %v", err)
		}
		for i, t := range raw {
			field := fmt.Sprintf("tools[%d]", i)
			if t.Type != "function" {
				return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "%s.type %q: only function tools are supported", field, t.Type)
			}
			if t.Function == nil {
				return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "%s.function is missing", field)
			}
			tools = append(tools, toolDef{name: t.Function.Name, description: t.Function.Description, schema: t.Function.Parameters, field: field + ".function"})
		}
		if e := checkTools(tools); e != nil {
			return nil, "", "", e
		}
	}
	mode, name := choiceAuto, ""
	if len(tools) == 0 {
		mode = choiceNone
	}
	if len(cr.ToolChoice) > 0 && string(cr.ToolChoice) != "null" {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(cr.ToolChoice, &s) == nil:
			switch s {
			case "none", "auto":
				mode = s
			case "required":
				mode = choiceAny
			default:
				return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice %q: want none, auto, required or a function", s)
			}
		case json.Unmarshal(cr.ToolChoice, &obj) == nil && obj.Type == "function" && obj.Function != nil:
			mode, name = choiceTool, obj.Function.Name
		default:
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice: want none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}")
		}
		if len(tools) == 0 && (mode == choiceAny || mode == choiceTool) {
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice asks for a tool call, but there are no tools")
		}
	}
	return tools, mode, name, nil
}

func (cr *chatRequest) job() (*contracts.JobRequest, *contracts.Error) {
	if cr.N != nil && *cr.N != 1 {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "n %d: only one choice per request", *cr.N)
	}
	tools, mode, name, e := cr.toolChoice()
	if e != nil {
		return nil, e
	}
	if cr.Logprobs && len(tools) > 0 && mode != choiceNone {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "logprobs with tools are not supported")
	}
	system, msgs, e := jobMessages(nil, cr.Messages, "system", "developer")
	if e != nil {
		return nil, e
	}
	req := &contracts.JobRequest{Model: cr.Model, System: system, Messages: msgs, Temperature: cr.Temperature, TopP: cr.TopP,
		Stream: cr.Stream, Metadata: cr.Metadata}
	if req.Thinking, e = cr.thinking(); e != nil {
		return nil, e
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_completion_tokens", cr.MaxCompletionTokens}, {"max_tokens", cr.MaxTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return nil, contracts.NewError(contracts.CodeMaxTokensOutOfRange, "%s %d: want at least 1", f.name, *f.v)
		}
		if req.MaxTokens == 0 {
			req.MaxTokens = *f.v
		}
	}
	if cr.TopLogprobs != nil && !cr.Logprobs {
		return nil, contracts.NewError(contracts.CodeInvalidSampling, "top_logprobs needs logprobs: true")
	}
	if cr.Logprobs {
		// They travel on the delta events, which a job that does not
		// stream publishes too (coalesced, all before its final event):
		// a call that does not stream follows them (chatCompletions).
		req.Logprobs = true
		if cr.TopLogprobs != nil {
			req.TopLogprobs = *cr.TopLogprobs
		}
	}
	req.Speculation = cr.Speculation // checked with the rest of the job
	req.WaitForModel = cr.WaitForModel
	if cr.Seed != nil {
		if *cr.Seed < 0 {
			return nil, contracts.NewError(contracts.CodeInvalidSampling, "seed %d is negative", *cr.Seed)
		}
		s := uint64(*cr.Seed)
		req.Seed = &s
	}
	if len(cr.Stop) > 0 && string(cr.Stop) != "null" {
		var one string
		if json.Unmarshal(cr.Stop, &one) == nil {
			req.StopSequences = []string{one}
		} else if json.Unmarshal(cr.Stop, &req.StopSequences) != nil {
			return nil, contracts.NewError(contracts.CodeInvalidSampling, "stop: want a string or a list of strings")
		}
	}
	if rf := cr.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, contracts.NewError(contracts.CodeInvalidSchema, "response_format.json_schema.schema is missing")
			}
			req.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: rf.JSONSchema.Schema}
		case "json_object":
			req.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: json.RawMessage(`{"type":"object"}`)}
		default:
			return nil, contracts.NewError(contracts.CodeInvalidRequest, "response_format.type %q: want text, json_object or json_schema", rf.Type)
		}
	}
	if e := applyTools(req, tools, mode, name); e != nil {
		return nil, e
	}
	return req, nil
}

// finishReason maps a stop reason to OpenAI's finish_reason.
func finishReason(s contracts.StopReason) string {
	switch s {
	case contracts.StopMaxTokens, contracts.StopMemoryLimit:
		return "length"
	default:
		return "stop"
	}
}

// openAIError answers OpenAI's error shape, with our code, and in param
// the request field at fault when the error names one.
func openAIError(w http.ResponseWriter, e *contracts.Error) {
	setRetryAfter(w, e)
	typ := errorType(e, "server_error")
	switch typ {
	case "request_too_large", "overloaded_error":
		typ = "invalid_request_error"
		if e.HTTPStatus() >= 500 {
			typ = "server_error"
		}
	}
	var param any // the field at fault, when the error names one
	if e.Field != "" {
		param = e.Field
	}
	writeJSON(w, e.HTTPStatus(), map[string]any{"error": map[string]any{"message": e.Error(), "type": typ, "param": param, "code": e.Code}})
}

// errorType names an error's class as the compatible APIs do, by its HTTP
// status; serverError names the 5xx class.
func errorType(e *contracts.Error, serverError string) string {
	switch st := e.HTTPStatus(); {
	case st == http.StatusUnauthorized:
		return "authentication_error"
	case st == http.StatusNotFound:
		return "not_found_error"
	case st == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case st == http.StatusServiceUnavailable:
		return "overloaded_error"
	case st == http.StatusTooManyRequests:
		return "rate_limit_error"
	case st >= 500:
		return serverError
	}
	return "invalid_request_error"
}

// openAILogprobs maps token log-probabilities to the chat completions
// shape: token, logprob, bytes and top_logprobs.
func openAILogprobs(lps []contracts.TokenLogprob) []map[string]any {
	out := make([]map[string]any, 0, len(lps))
	for _, l := range lps {
		top := make([]map[string]any, 0, len(l.TopLogprobs))
		for _, t := range l.TopLogprobs {
			top = append(top, map[string]any{"token": tokenText(t.Token, t.Bytes), "logprob": t.Logprob, "bytes": byteList(t.Token, t.Bytes)})
		}
		out = append(out, map[string]any{"token": tokenText(l.Token, l.Bytes), "logprob": l.Logprob, "bytes": byteList(l.Token, l.Bytes), "top_logprobs": top})
	}
	return out
}

// tokenText is a token's text, or for a token whose bytes are not UTF-8
// on their own (part of a character), "bytes:" and the bytes escaped, as
// the API writes such tokens.
func tokenText(text string, b []byte) string {
	if text != "" || len(b) == 0 {
		return text
	}
	var sb strings.Builder
	sb.WriteString("bytes:")
	for _, c := range b {
		fmt.Fprintf(&sb, "\\x%02x", c)
	}
	return sb.String()
}

// byteList is the token's bytes (its text's, when the worker sent none)
// as numbers, as the API writes them.
func byteList(text string, b []byte) []int {
	if b == nil {
		b = []byte(text)
	}
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		// CachedTokens counts the prompt tokens read from the KV cache's
		// shared prefix (included in PromptTokens).
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(u *contracts.Usage) *chatUsage {
	if u == nil {
		return nil
	}
	cu := &chatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	cu.PromptTokensDetails.CachedTokens = u.CachedInputTokens
	return cu
}

// chatCompletion is the chat completions API's answer for a completed
// job's result; logprobs is its choice's logprobs (nil: none asked). When
// the output is a tool call (see toolCallOf) the message holds it in
// tool_calls, its content null, and finish_reason is tool_calls (length
// when the output stopped inside the call: its arguments are cut short).
func chatCompletion(id, model string, created int64, res *contracts.Result, logprobs any) map[string]any {
	message := map[string]any{"role": "assistant", "content": res.Text}
	if res.Reasoning != "" {
		message["reasoning_content"] = res.Reasoning
	}
	finish := finishReason(res.StopReason)
	if c := toolCallOf(res); c != nil {
		message["content"] = nil
		message["tool_calls"] = []map[string]any{{"id": "call_" + id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": c.arguments}}}
		finish = callFinishReason(c)
	}
	return map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": model,
		"choices": []map[string]any{{"index": 0, "message": message,
			"logprobs": logprobs, "finish_reason": finish}},
		"usage": usageOf(res.Usage)}
}

// callFinishReason is the finish_reason of an answer that makes call c.
func callFinishReason(c *toolCall) string {
	if c.complete {
		return "tool_calls"
	}
	return "length"
}

// chatCompletions: POST /v1/chat/completions.
func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var cr chatRequest
	s := g.startSync(w, r, &cr, openAIError)
	if s == nil {
		return
	}
	req := s.req
	created := time.Now().Unix()
	completion := func(text, reasoning string, stop contracts.StopReason, u *contracts.Usage, logprobs any) {
		writeJSON(w, http.StatusOK, chatCompletion(s.id, req.Model, created, &contracts.Result{Text: text, Reasoning: reasoning, StopReason: stop, Usage: u, Metadata: req.Metadata}, logprobs))
	}
	if !cr.Stream && cr.Logprobs {
		// Log-probabilities travel on the delta events only: follow them
		// and answer in one piece.
		var text, reasoning strings.Builder
		var lps []map[string]any
		final, e := s.stream(nil, func(t string, l []contracts.TokenLogprob) error {
			text.WriteString(t)
			lps = append(lps, openAILogprobs(l)...)
			return nil
		}, func(t string) error {
			reasoning.WriteString(t)
			return nil
		})
		if e != nil {
			openAIError(w, e)
			return
		}
		completion(text.String(), strings.TrimSpace(reasoning.String()), final.StopReason, final.Usage, map[string]any{"content": lps})
		return
	}
	if !cr.Stream {
		res, e := s.wait()
		if e != nil {
			openAIError(w, e)
			return
		}
		completion(res.Text, res.Reasoning, res.StopReason, res.Usage, nil)
		return
	}
	out := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
	}
	first := true
	var cs *callStream
	if mode := req.Metadata[toolCallKey]; mode != "" {
		// Tools: the output may be a call, streamed as tool_calls deltas.
		role := func(d map[string]any) map[string]any {
			if first {
				d["role"], first = "assistant", false
			}
			return d
		}
		cs = newCallStream(mode, func(text string) error {
			return out.send("", "", chunk(role(map[string]any{"content": text}), nil))
		}, func(name string) error {
			return out.send("", "", chunk(role(map[string]any{"content": nil, "tool_calls": []map[string]any{{"index": 0, "id": "call_" + s.id,
				"type": "function", "function": map[string]any{"name": name, "arguments": ""}}}}), nil))
		}, func(args string) error {
			return out.send("", "", chunk(map[string]any{"tool_calls": []map[string]any{{"index": 0, "function": map[string]any{"arguments": args}}}}, nil))
		})
	}
	final, e := s.stream(out, func(text string, l []contracts.TokenLogprob) error {
		if cs != nil {
			return cs.feed(text)
		}
		d := map[string]any{"content": text}
		if first {
			d["role"], first = "assistant", false
		}
		c := chunk(d, nil)
		if cr.Logprobs {
			c["choices"].([]map[string]any)[0]["logprobs"] = map[string]any{"content": openAILogprobs(l)}
		}
		return out.send("", "", c)
	}, func(text string) error {
		d := map[string]any{"reasoning_content": text}
		if first {
			d["role"], first = "assistant", false
		}
		return out.send("", "", chunk(d, nil))
	})
	if e != nil {
		if !out.started {
			openAIError(w, e)
			return
		}
		// Headers are sent: the error goes in the stream.
		out.send("", "", map[string]any{"error": map[string]any{"message": e.Error(), "type": "server_error", "code": e.Code}})
		return
	}
	finish := finishReason(final.StopReason)
	if cs != nil {
		c, err := cs.end()
		if err != nil {
			return
		}
		if c != nil {
			finish = callFinishReason(c)
		}
	}
	if first {
		out.send("", "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	out.send("", "", chunk(map[string]any{}, finish))
	if cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage {
		out.send("", "", map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usageOf(final.Usage)})
	}
	out.send("", "", "[DONE]")
}
