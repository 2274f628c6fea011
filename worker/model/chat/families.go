package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// renderer carries the options of one RenderWith call to the renderers of
// the families added with tool and thinking support.
type renderer struct {
	t     Template
	o     RenderOptions
	tools []jsonValue // parsed RenderOptions.Tools
}

// parseTools parses the tool definitions, each of which must be a JSON
// object.
func parseTools(raw []json.RawMessage) ([]jsonValue, error) {
	out := make([]jsonValue, len(raw))
	for i, r := range raw {
		v, err := parseJSON(r)
		if err != nil {
			return nil, fmt.Errorf("%w: tool %d: %v", ErrInvalidTool, i, err)
		}
		if v.kind != 'o' {
			return nil, fmt.Errorf("%w: tool %d is not a JSON object", ErrInvalidTool, i)
		}
		out[i] = v
	}
	return out, nil
}

// toolJSON returns tojson of each tool definition, with the given indent.
func (r *renderer) toolJSON(i, indent int) string {
	var b strings.Builder
	toJSON(&b, r.tools[i], indent)
	return b.String()
}

// args returns tojson of a tool call's arguments object.
func (r *renderer) args(tn turn, c ToolCall) (string, error) {
	v, err := parseJSON([]byte(c.Arguments))
	if err != nil {
		return "", r.t.msgErr(tn, ErrInvalidTool, fmt.Sprintf("arguments of call %q are not JSON: %v", c.Name, err))
	}
	var b strings.Builder
	toJSON(&b, v, 0)
	return b.String(), nil
}

// qwenToolsHeader is the tool block of the Qwen 2.5 and Qwen3 templates,
// around the tool definitions.
const (
	qwenToolsIntro = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	qwenToolsOutro = "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": " +
		"<args-json-object>}\n</tool_call><|im_end|>\n"
	qwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
)

func (r *renderer) writeQwenTools(b *strings.Builder) {
	b.WriteString(qwenToolsIntro)
	for i := range r.tools {
		b.WriteString("\n")
		b.WriteString(r.toolJSON(i, 0))
	}
	b.WriteString(qwenToolsOutro)
}

// writeQwenToolMessage writes a tool result as both Qwen templates do:
// consecutive results share one user turn.
func writeQwenToolMessage(b *strings.Builder, turns []turn, i int) {
	if i == 0 || turns[i-1].Role != RoleTool {
		b.WriteString("<|im_start|>user")
	}
	b.WriteString("\n<tool_response>\n")
	b.WriteString(turns[i].Content)
	b.WriteString("\n</tool_response>")
	if i == len(turns)-1 || turns[i+1].Role != RoleTool {
		b.WriteString("<|im_end|>\n")
	}
}

// qwen25 follows the Qwen2.5 instruct template: ChatML with a default
// system prompt, tool definitions in the system turn, tool calls as
// <tool_call> blocks and tool results as <tool_response> blocks in a user
// turn.
func (r *renderer) qwen25(b *strings.Builder, turns []turn) error {
	firstSys := turns[0].Role == RoleSystem
	if len(r.tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if firstSys {
			b.WriteString(turns[0].Content)
		} else {
			b.WriteString(qwen25DefaultSystem)
		}
		b.WriteString("\n\n")
		r.writeQwenTools(b)
	} else if firstSys {
		b.WriteString("<|im_start|>system\n" + turns[0].Content + "<|im_end|>\n")
	} else {
		b.WriteString("<|im_start|>system\n" + qwen25DefaultSystem + "<|im_end|>\n")
	}
	for i, tn := range turns {
		switch {
		case tn.Role == RoleUser || (tn.Role == RoleSystem && i > 0) || (tn.Role == RoleAssistant && len(tn.ToolCalls) == 0):
			b.WriteString("<|im_start|>" + tn.Role + "\n" + tn.Content + "<|im_end|>\n")
		case tn.Role == RoleAssistant:
			b.WriteString("<|im_start|>assistant")
			if tn.Content != "" {
				b.WriteString("\n" + tn.Content)
			}
			for _, c := range tn.ToolCalls {
				a, err := r.args(tn, c)
				if err != nil {
					return err
				}
				b.WriteString("\n<tool_call>\n{\"name\": \"" + c.Name + "\", \"arguments\": " + a + "}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case tn.Role == RoleTool:
			writeQwenToolMessage(b, turns, i)
		}
	}
	if r.o.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return nil
}

// qwen3 follows the Qwen3 template: ChatML without a default system prompt;
// the assistant turns after the last user query keep their reasoning in a
// <think> block (the last one always gets the block), earlier ones lose it;
// with EnableThinking false the generation prompt carries an empty block.
func (r *renderer) qwen3(b *strings.Builder, turns []turn) error {
	firstSys := turns[0].Role == RoleSystem
	if len(r.tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if firstSys {
			b.WriteString(turns[0].Content + "\n\n")
		}
		r.writeQwenTools(b)
	} else if firstSys {
		b.WriteString("<|im_start|>system\n" + turns[0].Content + "<|im_end|>\n")
	}
	// The last user message that is not a wrapped tool response.
	lastQuery := len(turns) - 1
	for i := len(turns) - 1; i >= 0; i-- {
		c := turns[i].Content
		if turns[i].Role == RoleUser && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, tn := range turns {
		switch {
		case tn.Role == RoleUser || (tn.Role == RoleSystem && i > 0):
			b.WriteString("<|im_start|>" + tn.Role + "\n" + tn.Content + "<|im_end|>\n")
		case tn.Role == RoleAssistant:
			content, reasoning := tn.Content, tn.Reasoning
			if reasoning == "" {
				if parts := strings.Split(content, thinkClose); len(parts) > 1 {
					content = strings.TrimLeft(parts[len(parts)-1], "\n")
					before := strings.Split(strings.TrimRight(parts[0], "\n"), thinkOpen)
					reasoning = strings.TrimLeft(before[len(before)-1], "\n")
				}
			}
			if i > lastQuery && (i == len(turns)-1 || reasoning != "") {
				b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>assistant\n" + content)
			}
			for j, c := range tn.ToolCalls {
				if (j == 0 && content != "") || j > 0 {
					b.WriteString("\n")
				}
				a, err := r.args(tn, c)
				if err != nil {
					return err
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + c.Name + "\", \"arguments\": " + a + "}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case tn.Role == RoleTool:
			writeQwenToolMessage(b, turns, i)
		}
	}
	if r.o.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if r.o.EnableThinking != nil && !*r.o.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return nil
}

// llama31DefaultDate is the date the Llama 3.1+ templates write when the
// renderer gives none.
const llama31DefaultDate = "26 Jul 2024"

// llama31 follows the Llama 3.1–3.3 templates (tools in the first user
// message, as they default to): a system header with the knowledge cut-off
// and today's date, then the turns; tool calls as one JSON object, tool
// results in an "ipython" turn as a JSON string.
func (r *renderer) llama31(b *strings.Builder, turns []turn) error {
	b.WriteString("<|begin_of_text|>")
	system := ""
	if turns[0].Role == RoleSystem {
		system = pyStrip(turns[0].Content)
		turns = turns[1:]
	}
	date := llama31DefaultDate
	if !r.o.Today.IsZero() {
		date = r.o.Today.Format("02 Jan 2006")
	}
	b.WriteString("<|start_header_id|>system<|end_header_id|>\n\n")
	if len(r.tools) > 0 {
		b.WriteString("Environment: ipython\n")
	}
	b.WriteString("Cutting Knowledge Date: December 2023\n")
	b.WriteString("Today Date: " + date + "\n\n")
	b.WriteString(system)
	b.WriteString("<|eot_id|>")
	if len(r.tools) > 0 {
		if len(turns) == 0 {
			return &MessageError{Template: r.t.Name(), Index: -1, Role: RoleSystem,
				Reason: "tools go into the first user message, and there is none", Err: ErrRoleOrder}
		}
		first := pyStrip(turns[0].Content)
		turns = turns[1:]
		b.WriteString("<|start_header_id|>user<|end_header_id|>\n\n")
		b.WriteString("Given the following functions, please respond with a JSON for a function call ")
		b.WriteString("with its proper arguments that best answers the given prompt.\n\n")
		b.WriteString(`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.`)
		b.WriteString("Do not use variables.\n\n")
		for i := range r.tools {
			b.WriteString(r.toolJSON(i, 4))
			b.WriteString("\n\n")
		}
		b.WriteString(first + "<|eot_id|>")
	}
	for _, tn := range turns {
		switch {
		case len(tn.ToolCalls) > 0:
			if len(tn.ToolCalls) != 1 {
				return r.t.msgErr(tn, ErrToolsUnsupported, "this model makes one tool call per message")
			}
			c := tn.ToolCalls[0]
			a, err := r.args(tn, c)
			if err != nil {
				return err
			}
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
			b.WriteString(`{"name": "` + c.Name + `", "parameters": ` + a + "}<|eot_id|>")
		case tn.Role == RoleTool:
			// The reference template writes a string content through tojson
			// (a string is iterable in Jinja), so it arrives quoted.
			b.WriteString("<|start_header_id|>ipython<|end_header_id|>\n\n" + jsonString(tn.Content) + "<|eot_id|>")
		default:
			b.WriteString("<|start_header_id|>" + tn.Role + "<|end_header_id|>\n\n" + pyStrip(tn.Content) + "<|eot_id|>")
		}
	}
	if r.o.AddGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return nil
}

// gemma follows the Gemma templates: "<bos>", then per message
// "<start_of_turn>role\n" (the assistant's role is "model"), the trimmed
// content and "<end_of_turn>\n". Gemma has no system role: as the Gemma 3
// template does, a leading system message is folded into the first user
// turn, followed by a blank line (the Gemma 2 template refuses it instead).
// User and model turns must alternate, starting with the user.
func (r *renderer) gemma(b *strings.Builder, turns []turn) error {
	prefix := ""
	if turns[0].Role == RoleSystem {
		prefix = turns[0].Content + "\n\n"
		turns = turns[1:]
		if len(turns) == 0 {
			return &MessageError{Template: r.t.Name(), Index: -1, Role: RoleSystem,
				Reason: "the gemma template folds the system prompt into a user message, and there is none", Err: ErrRoleOrder}
		}
	}
	b.WriteString("<bos>")
	for i, tn := range turns {
		want := RoleUser
		if i%2 == 1 {
			want = RoleAssistant
		}
		if tn.Role != want {
			reason := "roles must alternate user, assistant, user, …; want " + want
			if tn.Role == RoleSystem {
				reason = "a system message may only come first"
			}
			return r.t.msgErr(tn, ErrRoleOrder, reason)
		}
		role := tn.Role
		if role == RoleAssistant {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if i == 0 {
			b.WriteString(prefix)
		}
		b.WriteString(pyStrip(tn.Content) + "<end_of_turn>\n")
	}
	if r.o.AddGenerationPrompt {
		b.WriteString("<start_of_turn>model\n")
	}
	return nil
}

// phi3 follows the Phi-3.5 template: "<|role|>\ncontent<|end|>\n" per
// message (a system message only when not empty), then "<|assistant|>\n" as
// the generation prompt or, without one, the end-of-text marker.
func (r *renderer) phi3(b *strings.Builder, turns []turn) {
	for _, tn := range turns {
		if tn.Role == RoleSystem && tn.Content == "" {
			continue
		}
		b.WriteString("<|" + tn.Role + "|>\n" + tn.Content + "<|end|>\n")
	}
	if r.o.AddGenerationPrompt {
		b.WriteString("<|assistant|>\n")
	} else {
		b.WriteString("<|endoftext|>")
	}
}

// mistralNemo follows the Mistral Nemo template: "<s>", then "[INST]…[/INST]"
// per user message with no spaces inside, each assistant reply followed by
// "</s>". The system prompt goes in front of the last user message, and only
// when that message ends the conversation; the tool definitions go just
// before the last user message. Users and assistants must alternate, tool
// calls and results aside.
func (r *renderer) mistralNemo(b *strings.Builder, turns []turn) error {
	system, hasSys := "", false
	if turns[0].Role == RoleSystem {
		system, hasSys = turns[0].Content, true
		turns = turns[1:]
	}
	lastUser := -1
	n := 0
	for i, tn := range turns {
		if tn.Role == RoleUser {
			lastUser = i
		}
		if tn.Role == RoleTool || len(tn.ToolCalls) > 0 {
			continue
		}
		if (tn.Role == RoleUser) != (n%2 == 0) || tn.Role == RoleSystem {
			reason := "after the optional system message, roles must alternate user, assistant, user, …"
			if tn.Role == RoleSystem {
				reason = "a system message may only come first"
			}
			return r.t.msgErr(tn, ErrRoleOrder, reason)
		}
		n++
	}
	b.WriteString("<s>")
	for i, tn := range turns {
		switch {
		case tn.Role == RoleUser:
			// The reference compares messages by value: an earlier user
			// message equal to the last one gets the tools too.
			if len(r.tools) > 0 && lastUser >= 0 && tn.Content == turns[lastUser].Content {
				if err := r.mistralTools(b); err != nil {
					return err
				}
			}
			if i == len(turns)-1 && hasSys {
				b.WriteString("[INST]" + system + "\n\n" + tn.Content + "[/INST]")
			} else {
				b.WriteString("[INST]" + tn.Content + "[/INST]")
			}
		case len(tn.ToolCalls) > 0:
			b.WriteString("[TOOL_CALLS][")
			for j, c := range tn.ToolCalls {
				if !mistralID(c.ID) {
					return r.t.msgErr(tn, ErrInvalidTool, fmt.Sprintf("tool call id %q is not nine characters long", c.ID))
				}
				a, err := r.args(tn, c)
				if err != nil {
					return err
				}
				// tojson of {"name": …, "arguments": …} without its closing brace.
				b.WriteString(`{"name": ` + jsonString(c.Name) + `, "arguments": ` + a)
				b.WriteString(`, "id": "` + c.ID + `"}`)
				if j < len(tn.ToolCalls)-1 {
					b.WriteString(", ")
				} else {
					b.WriteString("]</s>")
				}
			}
		case tn.Role == RoleAssistant:
			b.WriteString(tn.Content + "</s>")
		case tn.Role == RoleTool:
			if !mistralID(tn.ToolCallID) {
				return r.t.msgErr(tn, ErrInvalidTool, fmt.Sprintf("tool call id %q is not nine characters long", tn.ToolCallID))
			}
			b.WriteString(`[TOOL_RESULTS]{"content": ` + tn.Content + `, "call_id": "` + tn.ToolCallID + `"}[/TOOL_RESULTS]`)
		}
	}
	return nil
}

// mistralTools writes the [AVAILABLE_TOOLS] block: each tool's "function"
// object, its keys but "return" in order, string values written between
// quotes as they are, other values through tojson.
func (r *renderer) mistralTools(b *strings.Builder) error {
	b.WriteString("[AVAILABLE_TOOLS][")
	for i, tool := range r.tools {
		fn, ok := tool.get("function")
		if !ok || fn.kind != 'o' {
			return fmt.Errorf("%w: tool %d has no \"function\" object", ErrInvalidTool, i)
		}
		b.WriteString(`{"type": "function", "function": {`)
		first := true
		for k, key := range fn.keys {
			if key == "return" {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			val := fn.vals[k]
			if val.kind == 's' {
				b.WriteString(`"` + key + `": "` + val.text + `"`)
			} else {
				b.WriteString(`"` + key + `": `)
				toJSON(b, val, 0)
			}
		}
		b.WriteString("}}")
		if i < len(r.tools)-1 {
			b.WriteString(", ")
		} else {
			b.WriteString("]")
		}
	}
	b.WriteString("[/AVAILABLE_TOOLS]")
	return nil
}

// mistralID reports whether id has the nine bytes the reference template
// requires (it asks for letters and digits but checks only the length).
func mistralID(id string) bool { return len(id) == 9 }
