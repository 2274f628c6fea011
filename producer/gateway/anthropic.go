package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
)

// messagesRequest is the part of an Anthropic Messages request the gateway
// maps to a job.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []compatMessage `json:"messages"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Tools         json.RawMessage `json:"tools"`
	// ToolChoice is {"type": "auto" | "any" | "tool" | "none", "name": …};
	// disable_parallel_tool_use is accepted, but an answer makes at most
	// one call.
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	// Thinking is {"type": "enabled", "budget_tokens": N} or {"type":
	// "disabled"}: the job's thinking switch (budget_tokens is accepted;
	// max_tokens bounds the whole output).
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
	// WaitForModel is zerolayer's (contracts.JobRequest.WaitForModel):
	// queue the job for a worker of its model yet to start instead of an
	// unknown_model error while no live worker serves it.
	WaitForModel bool `json:"wait_for_model"`
}

func (mr *messagesRequest) job() (*contracts.JobRequest, *contracts.Error) {
	if mr.MaxTokens == nil {
		return nil, contracts.NewError(contracts.CodeMaxTokensOutOfRange, "max_tokens is required")
	}
	if *mr.MaxTokens < 0 {
		return nil, contracts.NewError(contracts.CodeMaxTokensOutOfRange, "max_tokens %d is negative", *mr.MaxTokens)
	}
	tools, mode, name, e := mr.toolChoice()
	if e != nil {
		return nil, e
	}
	var system []string
	if len(mr.System) > 0 && string(mr.System) != "null" {
		text, e := textContent(mr.System, "system")
		if e != nil {
			return nil, e
		}
		system = append(system, text)
	}
	sys, msgs, e := jobMessages(system, mr.Messages)
	if e != nil {
		return nil, e
	}
	req := &contracts.JobRequest{Model: mr.Model, System: sys, Messages: msgs, MaxTokens: *mr.MaxTokens,
		StopSequences: mr.StopSequences, Temperature: mr.Temperature, TopP: mr.TopP, TopK: mr.TopK, Stream: mr.Stream, WaitForModel: mr.WaitForModel}
	if mr.Metadata != nil && mr.Metadata.UserID != "" {
		req.Metadata = map[string]string{"user_id": mr.Metadata.UserID}
	}
	if mr.Thinking != nil {
		req.Thinking = &contracts.Thinking{Type: mr.Thinking.Type}
	}
	if e := applyTools(req, tools, mode, name); e != nil {
		return nil, e
	}
	return req, nil
}

// toolChoice reads the tools (custom tools; the API's server tools are
// refused) and the tool choice: the mode (auto when there are tools and
// no choice) and, for type tool, its name.
func (mr *messagesRequest) toolChoice() ([]toolDef, string, string, *contracts.Error) {
	var tools []toolDef
	if len(mr.Tools) > 0 && string(mr.Tools) != "null" {
		var raw []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(mr.Tools, &raw); err != nil {
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tools: want a list of {name, description, input_schema}: %v", err)
		}
		for i, t := range raw {
			field := fmt.Sprintf("tools[%d]", i)
			if t.Type != "" && t.Type != "custom" {
				return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "%s.type %q: only custom tools are supported", field, t.Type)
			}
			if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
				return nil, "", "", contracts.NewError(contracts.CodeInvalidSchema, "%s.input_schema is missing", field)
			}
			tools = append(tools, toolDef{name: t.Name, description: t.Description, schema: t.InputSchema, field: field})
		}
		if e := checkTools(tools); e != nil {
			return nil, "", "", e
		}
	}
	mode, name := choiceAuto, ""
	if len(tools) == 0 {
		mode = choiceNone
	}
	if tc := mr.ToolChoice; tc != nil {
		switch tc.Type {
		case choiceAuto, choiceNone, choiceAny:
			mode = tc.Type
		case choiceTool:
			if tc.Name == "" {
				return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice type tool needs a name")
			}
			mode, name = choiceTool, tc.Name
		default:
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice.type %q: want auto, any, tool or none", tc.Type)
		}
		if len(tools) == 0 && (mode == choiceAny || mode == choiceTool) {
			return nil, "", "", contracts.NewError(contracts.CodeInvalidRequest, "tool_choice asks for a tool call, but there are no tools")
		}
	}
	return tools, mode, name, nil
}

// jobless reports a request that is answered without running a job:
// max_tokens 0 asks for no output (the API's way to warm a prompt cache;
// here the answer only counts the prompt).
func (mr *messagesRequest) jobless() bool { return mr.MaxTokens != nil && *mr.MaxTokens == 0 }

// stopReason maps a stop reason to the Messages API's.
func stopReason(s contracts.StopReason) string {
	switch s {
	case contracts.StopMaxTokens, contracts.StopMemoryLimit:
		return "max_tokens"
	case contracts.StopSequence:
		return "stop_sequence"
	default:
		return "end_turn"
	}
}

// statusOverloaded is the status the Anthropic API answers when it is
// overloaded (its clients retry it, as they do 503).
const statusOverloaded = 529

// anthropicError answers the Messages API's error shape.
func anthropicError(w http.ResponseWriter, e *contracts.Error) {
	setRetryAfter(w, e)
	status := e.HTTPStatus()
	if status == http.StatusServiceUnavailable {
		status = statusOverloaded
	}
	writeJSON(w, status, anthropicErrorBody(e))
}

func anthropicErrorBody(e *contracts.Error) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": errorType(e, "api_error"), "message": e.Error(), "code": e.Code}}
}

// messageUsage is the Messages API's usage: input_tokens counts the
// prompt tokens not read from the cache (the KV cache's shared prefix),
// cache_read_input_tokens those that were; nothing is written to a cache
// the caller pays for.
type messageUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func messageUsageOf(u *contracts.Usage) messageUsage {
	if u == nil {
		return messageUsage{}
	}
	return messageUsage{InputTokens: u.InputTokens - u.CachedInputTokens, CacheReadInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens}
}

// stopSequence is the stop_sequence field: the sequence that matched, or
// null.
func stopSequence(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// anthropicMessage is the Messages API's message for a completed job's
// result. When the output is a tool call (see toolCallOf) the content is
// one tool_use block and stop_reason is tool_use; a call cut short (the
// output stopped inside it) has input {} and the stop reason of the
// output, max_tokens.
func anthropicMessage(id, model string, res *contracts.Result) map[string]any {
	content := []map[string]any{}
	stop := stopReason(res.StopReason)
	if c := toolCallOf(res); c != nil {
		input := json.RawMessage(`{}`)
		if c.complete {
			input = json.RawMessage(c.arguments)
			stop = "tool_use"
		}
		content = append(content, map[string]any{"type": "tool_use", "id": toolUseID(id), "name": c.name, "input": input})
	} else if res.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": res.Text})
	}
	if res.Reasoning != "" {
		content = append([]map[string]any{{"type": "thinking", "thinking": res.Reasoning, "signature": ""}}, content...)
	}
	return map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": stopSequence(res.StopSequence), "usage": messageUsageOf(res.Usage)}
}

// toolUseID is the id of the tool_use block of message id.
func toolUseID(id string) string { return "toolu_" + strings.TrimPrefix(id, "msg_") }

// messages: POST /v1/messages.
func (g *Gateway) messages(w http.ResponseWriter, r *http.Request) {
	var mr messagesRequest
	s := g.startSync(w, r, &mr, anthropicError)
	if s == nil {
		return
	}
	req, c := s.req, s.c
	message := func(text string, stop any, u messageUsage) map[string]any {
		content := []map[string]any{}
		if text != "" || stop != nil {
			content = append(content, map[string]any{"type": "text", "text": text})
		}
		return map[string]any{"id": s.id, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": u}
	}
	if s.id == "" {
		// max_tokens 0: no output, the prompt counted.
		n, err := c.PromptTokens(req)
		if err != nil {
			anthropicError(w, asError(err))
			return
		}
		done := &contracts.Result{StopReason: contracts.StopMaxTokens, Usage: &contracts.Usage{InputTokens: n}}
		id := "msg_" + strings.TrimPrefix(newRequestID(), "req_")
		if !mr.Stream {
			writeJSON(w, http.StatusOK, anthropicMessage(id, req.Model, done))
			return
		}
		out := newSSE(w)
		msg := message("", nil, messageUsage{InputTokens: n})
		msg["id"] = id
		out.send("", "message_start", map[string]any{"type": "message_start", "message": msg})
		out.send("", "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "max_tokens", "stop_sequence": nil},
			"usage": messageUsageOf(done.Usage)})
		out.send("", "message_stop", map[string]any{"type": "message_stop"})
		return
	}
	if !mr.Stream {
		res, e := s.wait()
		if e != nil {
			anthropicError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, anthropicMessage(s.id, req.Model, res))
		return
	}
	// The stream opens with the job's first token (or its end): an error
	// before that, an unknown model included, is answered with its status
	// and the API's error body, as the SDKs expect, not as an event.
	out := newSSE(w)
	inTokens, _ := c.PromptTokens(req)
	send := func(name string, v map[string]any) error {
		v["type"] = name
		return out.send("", name, v)
	}
	// A thinking job's reasoning comes first, in a thinking block (index
	// 0); then the one answer block: text, or a tool_use block when the
	// output is a tool call (its input streamed as input_json_delta).
	opened, block, index := false, "", -1
	open := func(kind, name string) error {
		if !opened {
			opened = true
			if err := send("message_start", map[string]any{"message": message("", nil, messageUsage{InputTokens: inTokens})}); err != nil {
				return err
			}
		}
		if block == kind || (block != "" && block != "thinking") {
			return nil
		}
		if block == "thinking" {
			if err := send("content_block_stop", map[string]any{"index": index}); err != nil {
				return err
			}
		}
		block = kind
		index++
		switch kind {
		case "tool_use":
			return send("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "tool_use", "id": toolUseID(s.id), "name": name, "input": map[string]any{}}})
		case "thinking":
			return send("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		}
		return send("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "text", "text": ""}})
	}
	cs := newCallStream(req.Metadata[toolCallKey], func(text string) error {
		if err := open("text", ""); err != nil {
			return err
		}
		return send("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": text}})
	}, func(name string) error {
		return open("tool_use", name)
	}, func(args string) error {
		return send("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}})
	})
	final, e := s.stream(out, func(text string, _ []contracts.TokenLogprob) error {
		return cs.feed(text)
	}, func(text string) error {
		if err := open("thinking", ""); err != nil {
			return err
		}
		return send("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "thinking_delta", "thinking": text}})
	})
	if e != nil {
		if !out.started {
			anthropicError(w, e)
			return
		}
		out.send("", "error", anthropicErrorBody(e))
		return
	}
	call, err := cs.end()
	if err != nil {
		return
	}
	if err := open("text", ""); err != nil {
		return
	}
	stop := stopReason(final.StopReason)
	if call != nil && call.complete {
		stop = "tool_use"
	}
	send("content_block_stop", map[string]any{"index": index})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": stopSequence(final.StopSequence)},
		"usage": messageUsageOf(final.Usage)})
	send("message_stop", map[string]any{})
}
