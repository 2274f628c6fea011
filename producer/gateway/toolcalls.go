package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
)

// Tool calls (OpenAI function calling, Anthropic tool use) are made with
// constrained decoding: the model is told about the tools in the system
// prompt, and the output is constrained so that a call is valid for its
// tool's schema by construction.
//
//   - A forced call of one tool (a named tool choice, or required/any with
//     a single tool): the whole output is the tool's arguments, constrained
//     to its schema (response_format json_schema).
//   - A forced call of any of several tools (required/any): the output is
//     one call object {"name": T, "arguments": …}, constrained to the anyOf
//     of one object per tool (name the const T, arguments T's schema).
//   - auto: the output is free text that does not start with toolTrigger,
//     or toolTrigger followed by one call object as above
//     (response_format.trigger): the model chooses, the call is valid.
//   - none (and no tools): the tools are ignored.
//
// At most one call is made per answer, whatever parallel_tool_calls or
// disable_parallel_tool_use say. How the output maps back to a call is
// recorded in the job's metadata (toolCallKey), so that a result alone
// (a batch's) gives the answer.

// toolTrigger starts a call in free output (tool_choice auto), and a call
// made in an earlier turn when the conversation is rendered as text.
const toolTrigger = "<tool_call>"

// toolCallKey is the job metadata key that says how the output maps to a
// tool call: "tool:NAME" (the output is NAME's arguments), "any" (the
// output is a call object) or "auto" (text, or toolTrigger and a call
// object). Absent: the output is text.
const toolCallKey = "zl_tool_call"

// toolDef is one tool of a request, whatever the API.
type toolDef struct {
	name        string
	description string
	schema      json.RawMessage // the arguments' JSON Schema
	field       string          // where it was declared, for errors
}

// toolNameRE is what both APIs allow as a tool name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// The tool choice modes, as the Messages API names them (OpenAI's
// required is any, a named function is tool).
const (
	choiceNone = "none"
	choiceAuto = "auto"
	choiceAny  = "any"
	choiceTool = "tool"
)

// checkTools checks the tools' names (unique, the APIs' alphabet) and
// schemas (a JSON object that compiles; absent means any object).
func checkTools(tools []toolDef) *contracts.Error {
	seen := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		if !toolNameRE.MatchString(t.name) {
			return &contracts.Error{Code: contracts.CodeInvalidRequest, Field: t.field + ".name",
				Message: fmt.Sprintf("%s.name %q: want 1-64 letters, digits, _ or -", t.field, t.name)}
		}
		if seen[t.name] {
			return &contracts.Error{Code: contracts.CodeInvalidRequest, Field: t.field + ".name",
				Message: fmt.Sprintf("%s.name %q: two tools have this name", t.field, t.name)}
		}
		seen[t.name] = true
		if len(t.schema) == 0 || string(t.schema) == "null" {
			t.schema = json.RawMessage(`{"type":"object"}`)
		}
		if msg := toolSchemaProblem(t.schema); msg != "" {
			return &contracts.Error{Code: contracts.CodeInvalidSchema, Field: t.field + ".schema",
				Message: fmt.Sprintf("tool %q: %s", t.name, msg)}
		}
	}
	return nil
}

// toolSchemaProblem says why raw is not a usable tool schema, or "": it
// must be a JSON object (the arguments are one) and compile
// (contracts.SchemaProblem).
func toolSchemaProblem(raw json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		if !json.Valid(raw) {
			return "the schema is not valid JSON"
		}
		return "the schema must be a JSON object"
	}
	return contracts.SchemaProblem(raw)
}

// applyTools sets up req for tools under a tool choice (mode, and name
// for choiceTool): the system prompt that tells the model about them, the
// constraint, and the metadata that maps the output back. With choiceNone
// or no tools req is left alone.
func applyTools(req *contracts.JobRequest, tools []toolDef, mode, name string) *contracts.Error {
	if len(tools) == 0 || mode == choiceNone {
		return nil
	}
	if req.ResponseFormat != nil {
		return contracts.NewError(contracts.CodeInvalidRequest, "tools with tool choice %s and a response format cannot both constrain the output; use one", mode)
	}
	if mode == choiceAny && len(tools) == 1 {
		mode, name = choiceTool, tools[0].name
	}
	var tool *toolDef
	if mode == choiceTool {
		for i := range tools {
			if tools[i].name == name {
				tool = &tools[i]
			}
		}
		if tool == nil {
			return contracts.NewError(contracts.CodeInvalidRequest, "tool_choice names the tool %q, which is not in tools", name)
		}
	}
	var sb strings.Builder
	sb.WriteString(req.System)
	if req.System != "" {
		sb.WriteString("\n\n")
	}
	sb.WriteString(toolPrompt(tools, mode, name))
	req.System = sb.String()
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	switch mode {
	case choiceTool:
		req.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: tool.schema}
		req.Metadata[toolCallKey] = "tool:" + name
	case choiceAny:
		req.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: callSchema(tools)}
		req.Metadata[toolCallKey] = choiceAny
	default:
		req.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatJSONSchema, Schema: callSchema(tools), Trigger: toolTrigger}
		req.Metadata[toolCallKey] = choiceAuto
	}
	// A stop sequence would cut a call short.
	req.StopSequences = nil
	return nil
}

// toolPrompt is the tools' part of the system prompt: a list of the tools
// (name, description, the arguments' schema), then how to call one:
//
//	You can use these tools:
//	- get_weather: Tells the weather. Arguments: {"type":"object",…}
//	To call a tool, reply with <tool_call> and then {"name": "TOOL", "arguments": {…}}, nothing else.
//
// (required/any: "Reply with a call of one of the tools as {…}, nothing
// else."; a named tool: "Reply with the arguments of NAME as a JSON object,
// nothing else.").
func toolPrompt(tools []toolDef, mode, name string) string {
	var sb strings.Builder
	sb.WriteString("You can use these tools:\n")
	for _, t := range tools {
		var compact bytes.Buffer
		if json.Compact(&compact, t.schema) != nil {
			compact.Write(t.schema)
		}
		fmt.Fprintf(&sb, "- %s", t.name)
		if d := strings.TrimSpace(t.description); d != "" {
			fmt.Fprintf(&sb, ": %s", d)
		}
		fmt.Fprintf(&sb, " Arguments: %s\n", compact.Bytes())
	}
	switch mode {
	case choiceTool:
		fmt.Fprintf(&sb, "Reply with the arguments of %s as a JSON object, nothing else.", name)
	case choiceAny:
		sb.WriteString(`Reply with a call of one of the tools as {"name": "TOOL", "arguments": {…}}, nothing else.`)
	default:
		sb.WriteString(`To call a tool, reply with ` + toolTrigger + ` and then {"name": "TOOL", "arguments": {…}}, nothing else.`)
	}
	return sb.String()
}

// callSchema is the schema of one call object of any of tools: the anyOf
// of {"name": {"const": T}, "arguments": T's schema} per tool. A tool's
// schema without an $id is given one (urn:zerolayer:tool:T), so that its
// local $refs (#/$defs/…) still point into it once it is nested.
func callSchema(tools []toolDef) json.RawMessage {
	branches := make([]map[string]any, len(tools))
	for i, t := range tools {
		args := t.schema
		var m map[string]json.RawMessage
		if json.Unmarshal(args, &m) == nil && m["$id"] == nil {
			m["$id"], _ = json.Marshal("urn:zerolayer:tool:" + t.name)
			args, _ = json.Marshal(m)
		}
		branches[i] = map[string]any{"type": "object",
			"properties":           map[string]any{"name": map[string]any{"const": t.name}, "arguments": args},
			"required":             []string{"name", "arguments"},
			"additionalProperties": false}
	}
	b, _ := json.Marshal(map[string]any{"anyOf": branches})
	return b
}

// toolCall is the call a job's output makes.
type toolCall struct {
	name string
	// arguments is the arguments' JSON text; cut short when !complete.
	arguments string
	// complete: the call is whole (the output did not stop inside it).
	complete bool
}

// callHead matches the start of a call object written name first, up to
// its arguments' value.
var callHead = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*"([a-zA-Z0-9_-]*)"\s*,\s*"arguments"\s*:\s*`)

// callTail matches what closes a call object after its arguments.
var callTail = regexp.MustCompile(`\s*\}\s*$`)

// parseCall reads a call object; one cut short gives what can be read
// (the name when it came first, the arguments' start).
func parseCall(text string) *toolCall {
	var c struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(text), &c); err == nil && c.Name != "" {
		return &toolCall{name: c.Name, arguments: string(c.Arguments), complete: true}
	}
	if m := callHead.FindStringSubmatchIndex(text); m != nil {
		return &toolCall{name: text[m[2]:m[3]], arguments: text[m[1]:]}
	}
	return &toolCall{}
}

// toolCallOf is the call a job's result makes, or nil when its output is
// text (no tools, tool choice none, or auto and the model wrote text).
func toolCallOf(res *contracts.Result) *toolCall {
	mode := res.Metadata[toolCallKey]
	switch {
	case mode == "":
		return nil
	case strings.HasPrefix(mode, "tool:"):
		args := strings.TrimSpace(res.Text)
		return &toolCall{name: strings.TrimPrefix(mode, "tool:"), arguments: args, complete: json.Valid([]byte(args))}
	case mode == choiceAuto:
		rest, ok := strings.CutPrefix(res.Text, toolTrigger)
		if !ok {
			return nil
		}
		return parseCall(rest)
	default:
		return parseCall(res.Text)
	}
}

// callStream follows a streamed job's text for its tool call: text goes
// to onText, a call to onCall (its name, once known) and then onArgs
// (pieces of its arguments' JSON text). A call of one of several tools
// streams its arguments as they come when the name is written first; when
// not, the call is passed on whole at the end.
type callStream struct {
	mode   string // the toolCallKey value
	onText func(string) error
	onCall func(name string) error
	onArgs func(string) error

	state   int    // csUndecided, csText, csHead, csArgs
	held    string // output not passed on yet
	all     string // the call object so far (any, auto)
	started bool   // onCall was called
}

// The states of a callStream.
const (
	csUndecided = iota // auto: the output may still become the trigger
	csText             // text: passed on as it comes
	csHead             // a call object before its arguments
	csArgs             // a call's arguments
)

func newCallStream(mode string, onText func(string) error, onCall func(string) error, onArgs func(string) error) *callStream {
	cs := &callStream{mode: mode, onText: onText, onCall: onCall, onArgs: onArgs}
	switch {
	case mode == "":
		cs.state = csText
	case strings.HasPrefix(mode, "tool:"):
		cs.state = csArgs
	case mode == choiceAuto:
		cs.state = csUndecided
	default:
		cs.state = csHead
	}
	return cs
}

// feed takes the next piece of output.
func (cs *callStream) feed(text string) error {
	switch cs.state {
	case csText:
		return cs.onText(text)
	case csUndecided:
		cs.held += text
		switch {
		case strings.HasPrefix(cs.held, toolTrigger):
			rest := cs.held[len(toolTrigger):]
			cs.held, cs.state = "", csHead
			return cs.feed(rest)
		case strings.HasPrefix(toolTrigger, cs.held):
			return nil
		}
		cs.state = csText
		t := cs.held
		cs.held = ""
		return cs.onText(t)
	case csHead:
		cs.all += text
		m := callHead.FindStringSubmatchIndex(cs.all)
		if m == nil {
			return nil
		}
		if err := cs.start(cs.all[m[2]:m[3]]); err != nil {
			return err
		}
		cs.state = csArgs
		return cs.args(cs.all[m[1]:])
	default:
		if strings.HasPrefix(cs.mode, "tool:") {
			if err := cs.start(strings.TrimPrefix(cs.mode, "tool:")); err != nil {
				return err
			}
			cs.all += text
			return cs.onArgs(text)
		}
		cs.all += text
		return cs.args(text)
	}
}

func (cs *callStream) start(name string) error {
	if cs.started {
		return nil
	}
	cs.started = true
	return cs.onCall(name)
}

// args passes on a call object's arguments, holding back what may be the
// object's closing brace.
func (cs *callStream) args(text string) error {
	cs.held += text
	cut := len(cs.held)
	if loc := callTail.FindStringIndex(cs.held); loc != nil {
		// Keep the last '}' and what follows it.
		if i := strings.LastIndexByte(cs.held, '}'); i >= 0 {
			cut = i
		}
	}
	out := cs.held[:cut]
	cs.held = cs.held[cut:]
	if out == "" {
		return nil
	}
	return cs.onArgs(out)
}

// end passes on what was held back and returns the call made (nil: text).
func (cs *callStream) end() (*toolCall, error) {
	switch cs.state {
	case csUndecided:
		cs.state = csText
		if cs.held != "" {
			return nil, cs.onText(cs.held)
		}
		return nil, nil
	case csText:
		return nil, nil
	}
	var c *toolCall
	if strings.HasPrefix(cs.mode, "tool:") {
		c = toolCallOf(&contracts.Result{Text: cs.all, Metadata: map[string]string{toolCallKey: cs.mode}})
		if err := cs.start(c.name); err != nil {
			return nil, err
		}
		return c, nil
	}
	c = parseCall(cs.all)
	if err := cs.start(c.name); err != nil {
		return nil, err
	}
	rest := cs.held
	if cs.state == csHead {
		// The name came late, or never: the arguments go whole.
		rest = c.arguments
	} else if c.complete {
		rest = callTail.ReplaceAllString(rest, "")
	}
	if rest != "" {
		return c, cs.onArgs(rest)
	}
	return c, nil
}
