package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// publishedDir holds the chat templates as published with popular models
// (the shared test data, seen from this package's directory).
const publishedDir = "../../../../shared/tokenizers/templates"

// published returns the source of a published template, skipping the test
// when the shared folder is absent.
func published(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(publishedDir, name))
	if err != nil {
		t.Skipf("published template %s not available (%v): the shared test data folder is absent", name, err)
	}
	return string(b)
}

// weatherTool is a tool definition as the OpenAI API gives it, compact, so
// that the templates' tojson has to re-space it.
const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Get the weather",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`

// weatherToolJSON is weatherTool as tojson writes it; weatherToolIndent as
// tojson(indent=4) does.
const (
	weatherToolJSON = `{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", ` +
		`"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`
	weatherToolIndent = "{\n" +
		"    \"type\": \"function\",\n" +
		"    \"function\": {\n" +
		"        \"name\": \"get_weather\",\n" +
		"        \"description\": \"Get the weather\",\n" +
		"        \"parameters\": {\n" +
		"            \"type\": \"object\",\n" +
		"            \"properties\": {\n" +
		"                \"city\": {\n" +
		"                    \"type\": \"string\"\n" +
		"                }\n" +
		"            },\n" +
		"            \"required\": [\n" +
		"                \"city\"\n" +
		"            ]\n" +
		"        }\n" +
		"    }\n" +
		"}"
)

// The Qwen tool block as both Qwen templates write it, around the
// definitions.
const (
	qwenIntro = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
	qwenOutro = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
		"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n" +
		"</tool_call><|im_end|>\n"
)

func user(s string) Message { return Message{Role: RoleUser, Content: s} }
func asst(s string) Message { return Message{Role: RoleAssistant, Content: s} }
func sys(s string) Message  { return Message{Role: RoleSystem, Content: s} }
func tool(s string) Message { return Message{Role: RoleTool, Content: s, ToolCallID: "call00001"} }

// weatherCall is an assistant turn that calls the weather tool.
func weatherCall(content string) Message {
	return Message{Role: RoleAssistant, Content: content, ToolCalls: []ToolCall{
		{ID: "call00001", Name: "get_weather", Arguments: `{"city":"Paris"}`},
	}}
}

func boolp(b bool) *bool { return &b }

var tools = []json.RawMessage{json.RawMessage(weatherTool)}

// TestPublishedTemplates recognises each published template and renders
// conversations with it. The expected texts were worked out by hand from
// the Jinja source of each template.
func TestPublishedTemplates(t *testing.T) {
	t.Parallel()
	type conv struct {
		name string
		msgs []Message
		o    RenderOptions
		want string
	}
	tests := []struct {
		file   string
		family string
		convs  []conv
	}{
		{file: "Qwen-Qwen3-0.6B.jinja", family: "qwen3", convs: []conv{
			{name: "system, thinking on by default", msgs: []Message{sys("You are terse."), user("Hi!")},
				o:    RenderOptions{AddGenerationPrompt: true},
				want: "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
			{name: "thinking on", msgs: []Message{user("Hi!")},
				o:    RenderOptions{AddGenerationPrompt: true, EnableThinking: boolp(true)},
				want: "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
			{name: "thinking off", msgs: []Message{sys("You are terse."), user("Hi!")},
				o: RenderOptions{AddGenerationPrompt: true, EnableThinking: boolp(false)},
				want: "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n" +
					"<|im_start|>assistant\n<think>\n\n</think>\n\n"},
			// Reasoning of a turn before the last user query is dropped.
			{name: "multi-turn drops old reasoning",
				msgs: []Message{user("What is 2+2?"), asst("<think>\nadd them\n</think>\n\n4"), user("And 3+3?")},
				o:    RenderOptions{AddGenerationPrompt: true, EnableThinking: boolp(false)},
				want: "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n" +
					"<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
			// Tools in the system turn; after the last query the final
			// turn keeps its reasoning, the tool-calling turn (without
			// reasoning) has none.
			{name: "tools, call, response, reasoning kept",
				msgs: []Message{sys("S"), user("Weather in Paris?"), weatherCall(""), tool(`{"temp": 20}`),
					asst("<think>\nIt is warm.\n</think>\n\nIt is 20 degrees.")},
				o: RenderOptions{Tools: tools},
				want: "<|im_start|>system\nS\n\n" + qwenIntro + weatherToolJSON + qwenOutro +
					"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
					"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
					"<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n" +
					"<|im_start|>assistant\n<think>\nIt is warm.\n</think>\n\nIt is 20 degrees.<|im_end|>\n"},
			{name: "tools without system, reasoning field, call after content",
				msgs: []Message{user("Paris?"), {Role: RoleAssistant, Content: "Checking.", Reasoning: "\nNeed the tool.\n",
					ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
				o: RenderOptions{Tools: tools},
				want: "<|im_start|>system\n" + qwenIntro + weatherToolJSON + qwenOutro +
					"<|im_start|>user\nParis?<|im_end|>\n" +
					"<|im_start|>assistant\n<think>\nNeed the tool.\n</think>\n\nChecking.\n" +
					"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"},
		}},
		{file: "Qwen-Qwen2.5-7B-Instruct.jinja", family: "qwen2.5", convs: []conv{
			{name: "default system", msgs: []Message{user("Hi!")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
					"<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
			{name: "system, multi-turn", msgs: []Message{sys("S"), user("a"), asst("b"), user("c")},
				o: RenderOptions{AddGenerationPrompt: true},
				want: "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n" +
					"<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"},
			{name: "tools", msgs: []Message{user("Weather in Paris?"), weatherCall("Let me check."), tool(`{"temp": 20}`)},
				o: RenderOptions{AddGenerationPrompt: true, Tools: tools},
				want: "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n" +
					qwenIntro + weatherToolJSON + qwenOutro +
					"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
					"<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
					"<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n" +
					"<|im_start|>assistant\n"},
		}},
		{file: "google-gemma-2-2b-it.jinja", family: "gemma", convs: []conv{
			{name: "user", msgs: []Message{user("Hi!")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n"},
			{name: "multi-turn trimmed", msgs: []Message{user(" a "), asst("b\n"), user("c")},
				want: "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n" +
					"<start_of_turn>user\nc<end_of_turn>\n"},
			// The Gemma 2 template refuses a system message; Gemma 3's
			// folds it into the first user turn, as rendered here.
			{name: "system folded into the first user turn",
				msgs: []Message{sys("Be brief."), user(" Hi! "), asst("Hello."), user("Bye")},
				o:    RenderOptions{AddGenerationPrompt: true},
				want: "<bos><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n" +
					"<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"},
		}},
		{file: "meta-llama-Llama-3.2-3B-Instruct.jinja", family: "llama3.1", convs: []conv{
			{name: "system", msgs: []Message{sys(" You are terse. "), user("Hi!")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
					"Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|>" +
					"<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
			{name: "no system, date given, multi-turn",
				msgs: []Message{user("a"), asst(" b "), user("c")},
				o:    RenderOptions{Today: time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)},
				want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
					"Cutting Knowledge Date: December 2023\nToday Date: 05 Mar 2025\n\n<|eot_id|>" +
					"<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>" +
					"<|start_header_id|>assistant<|end_header_id|>\n\nb<|eot_id|>" +
					"<|start_header_id|>user<|end_header_id|>\n\nc<|eot_id|>"},
			{name: "tools in the first user message",
				msgs: []Message{sys("S"), user(" Weather in Paris? "), weatherCall("ignored"), tool(`{"temp": 20}`)},
				o:    RenderOptions{AddGenerationPrompt: true, Tools: tools},
				want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
					"Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nS<|eot_id|>" +
					"<|start_header_id|>user<|end_header_id|>\n\n" +
					"Given the following functions, please respond with a JSON for a function call with its proper arguments " +
					"that best answers the given prompt.\n\n" +
					"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}." +
					"Do not use variables.\n\n" + weatherToolIndent + "\n\n" + "Weather in Paris?<|eot_id|>" +
					"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>" +
					"<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 20}\"<|eot_id|>" +
					"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		}},
		{file: "mistralai-Mistral-Nemo-Instruct-2407.jinja", family: "mistral-nemo", convs: []conv{
			{name: "system", msgs: []Message{sys("S"), user("Hi!")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<s>[INST]S\n\nHi![/INST]"},
			// The system prompt goes in front of the last user message.
			{name: "multi-turn", msgs: []Message{sys("S"), user("a"), asst("b"), user("c")},
				want: "<s>[INST]a[/INST]b</s>[INST]S\n\nc[/INST]"},
			{name: "tools before the last user message",
				msgs: []Message{user("Weather in Paris?"), weatherCall(""), tool(`{"temp": 20}`), asst("It is 20 degrees."), user("Thanks")},
				o:    RenderOptions{Tools: tools},
				want: "<s>[INST]Weather in Paris?[/INST]" +
					"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"call00001\"}]</s>" +
					"[TOOL_RESULTS]{\"content\": {\"temp\": 20}, \"call_id\": \"call00001\"}[/TOOL_RESULTS]" +
					"It is 20 degrees.</s>" +
					"[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather\", " +
					"\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}][/AVAILABLE_TOOLS]" +
					"[INST]Thanks[/INST]"},
		}},
		{file: "microsoft-Phi-3.5-mini-instruct.jinja", family: "phi3", convs: []conv{
			{name: "system", msgs: []Message{sys("S"), user("Hi!")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<|system|>\nS<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\n"},
			{name: "no generation prompt ends with eos", msgs: []Message{user("a"), asst("b")},
				want: "<|user|>\na<|end|>\n<|assistant|>\nb<|end|>\n<|endoftext|>"},
			{name: "empty system skipped", msgs: []Message{sys(""), user("a")}, o: RenderOptions{AddGenerationPrompt: true},
				want: "<|user|>\na<|end|>\n<|assistant|>\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			tp, err := Detect(published(t, tt.file))
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if tp.Name() != tt.family {
				t.Fatalf("Detect() = %q, want %q", tp.Name(), tt.family)
			}
			for _, c := range tt.convs {
				got, err := tp.RenderWith("", c.msgs, c.o)
				if err != nil {
					t.Errorf("%s: RenderWith: %v", c.name, err)
					continue
				}
				if got != c.want {
					t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
				}
			}
		})
	}
}

func TestToolAndThinkingErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tmpl    string
		name    string
		msgs    []Message
		o       RenderOptions
		wantErr error
	}{
		{tmpl: "gemma", name: "tools", msgs: []Message{user("a")}, o: RenderOptions{Tools: tools}, wantErr: ErrToolsUnsupported},
		{tmpl: "chatml", name: "tool message", msgs: []Message{user("a"), tool("r")}, wantErr: ErrToolsUnsupported},
		{tmpl: "phi3", name: "tool call", msgs: []Message{user("a"), weatherCall("")}, wantErr: ErrToolsUnsupported},
		{tmpl: "qwen3", name: "tool not an object", msgs: []Message{user("a")},
			o: RenderOptions{Tools: []json.RawMessage{json.RawMessage(`[1]`)}}, wantErr: ErrInvalidTool},
		{tmpl: "qwen3", name: "tool not JSON", msgs: []Message{user("a")},
			o: RenderOptions{Tools: []json.RawMessage{json.RawMessage(`{`)}}, wantErr: ErrInvalidTool},
		{tmpl: "qwen2.5", name: "arguments not JSON", msgs: []Message{user("a"),
			{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{"}}}}, wantErr: ErrInvalidTool},
		{tmpl: "qwen3", name: "user tool call", msgs: []Message{{Role: RoleUser, ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}}}},
			wantErr: ErrInvalidTool},
		{tmpl: "llama3.1", name: "two calls", msgs: []Message{user("a"),
			{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "f", Arguments: "{}"}, {Name: "g", Arguments: "{}"}}}}, wantErr: ErrToolsUnsupported},
		{tmpl: "llama3.1", name: "tools without user", msgs: []Message{sys("s")}, o: RenderOptions{Tools: tools}, wantErr: ErrRoleOrder},
		{tmpl: "mistral-nemo", name: "short call id", msgs: []Message{user("a"),
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "f", Arguments: "{}"}}}}, wantErr: ErrInvalidTool},
		{tmpl: "mistral-nemo", name: "tool result without id", msgs: []Message{user("a"), {Role: RoleTool, Content: "r"}}, wantErr: ErrInvalidTool},
		{tmpl: "mistral-nemo", name: "two users", msgs: []Message{user("a"), user("b")}, wantErr: ErrRoleOrder},
		{tmpl: "mistral-nemo", name: "late system", msgs: []Message{user("a"), asst("b"), sys("c")}, wantErr: ErrRoleOrder},
		{tmpl: "gemma", name: "two users", msgs: []Message{user("a"), user("b")}, wantErr: ErrRoleOrder},
		{tmpl: "gemma", name: "starts with model", msgs: []Message{asst("a")}, wantErr: ErrRoleOrder},
		{tmpl: "gemma", name: "system only", msgs: []Message{sys("a")}, wantErr: ErrRoleOrder},
		{tmpl: "qwen3", name: "unknown role", msgs: []Message{{Role: "robot"}}, wantErr: ErrInvalidRole},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			tp, err := Named(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tp.RenderWith("", tt.msgs, tt.o)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("RenderWith() error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	// The thinking switch is ignored by templates that have none.
	for _, n := range Names() {
		tp, _ := Named(n)
		a, err1 := tp.RenderWith("", []Message{user("a")}, RenderOptions{AddGenerationPrompt: true})
		b, err2 := tp.RenderWith("", []Message{user("a")}, RenderOptions{AddGenerationPrompt: true, EnableThinking: boolp(false)})
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", n, err1, err2)
		}
		if (a != b) != tp.SupportsThinking() {
			t.Errorf("%s: thinking switch changed the prompt = %v, SupportsThinking() = %v", n, a != b, tp.SupportsThinking())
		}
	}
}

func TestSplitReasoning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, reasoning, answer string
	}{
		{name: "none", text: "Just an answer.", answer: "Just an answer."},
		{name: "empty", text: ""},
		{name: "block then answer", text: "<think>\nadd them\n</think>\n\n4", reasoning: "add them", answer: "4"},
		{name: "empty block (thinking off)", text: "<think>\n\n</think>\n\nHi.", answer: "Hi."},
		{name: "white space before the block", text: "\n<think>r</think>a", reasoning: "r", answer: "a"},
		{name: "text before a block: all answer", text: "Hm. <think>r</think>\nA", answer: "Hm. <think>r</think>\nA"},
		{name: "unclosed", text: "<think>\nstill thinking", reasoning: "still thinking"},
		{name: "unclosed with a partial close tag", text: "<think>\nstill thinking\n</thi", reasoning: "still thinking"},
		{name: "unclosed, just the open tag", text: "<think>"},
		{name: "partial open tag is answer", text: "<thi", answer: "<thi"},
		{name: "close only: answer (a stream cannot know it is reasoning)", text: "reasoning\n</think>\n\nanswer", answer: "reasoning\n</think>\n\nanswer"},
		{name: "only the first block", text: "<think>a</think>b<think>c</think>d", reasoning: "a", answer: "b<think>c</think>d"},
		{name: "answer keeps inner newlines", text: "<think>r</think>\n\nline1\n\nline2\n", reasoning: "r", answer: "line1\n\nline2\n"},
	}
	for _, tt := range tests {
		r, a := SplitReasoning(tt.text)
		if r != tt.reasoning || a != tt.answer {
			t.Errorf("%s: SplitReasoning(%q) = (%q, %q), want (%q, %q)", tt.name, tt.text, r, a, tt.reasoning, tt.answer)
		}
		// Streamed, cut in three pieces at every pair of places (tags cut
		// across pieces), the splitter gives the same.
		for i := 0; i <= len(tt.text); i++ {
			for j := i; j <= len(tt.text); j++ {
				var s ReasoningSplitter
				var rs, as strings.Builder
				for _, p := range []string{tt.text[:i], tt.text[i:j], tt.text[j:]} {
					r, a := s.Push(p)
					rs.WriteString(r)
					as.WriteString(a)
				}
				r, a := s.Flush()
				rs.WriteString(r)
				as.WriteString(a)
				if strings.Trim(rs.String(), "\n") != tt.reasoning || as.String() != tt.answer {
					t.Fatalf("%s: cut at %d, %d: reasoning %q, answer %q", tt.name, i, j, rs.String(), as.String())
				}
			}
		}
	}
}

func TestToJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		indent int
		want   string
	}{
		{in: `{"a":1,"b":[true,null,1.50,"x"],"c":{},"d":[]}`, want: `{"a": 1, "b": [true, null, 1.50, "x"], "c": {}, "d": []}`},
		{in: `{"z":1,"a":2}`, want: `{"z": 1, "a": 2}`}, // key order kept
		{in: `"tab\t quote\" back\\ nl\n ctl\u0001 é <&> \u2028"`, want: "\"tab\\t quote\\\" back\\\\ nl\\n ctl\\u0001 é <&> \u2028\""},
		{in: `{"a":[1,{"b":{}}]}`, indent: 2, want: "{\n  \"a\": [\n    1,\n    {\n      \"b\": {}\n    }\n  ]\n}"},
	}
	for _, tt := range tests {
		v, err := parseJSON([]byte(tt.in))
		if err != nil {
			t.Fatalf("parseJSON(%s): %v", tt.in, err)
		}
		var b = new(stringsBuilder)
		toJSON(&b.Builder, v, tt.indent)
		if b.String() != tt.want {
			t.Errorf("toJSON(%s, %d) = %q, want %q", tt.in, tt.indent, b.String(), tt.want)
		}
	}
	if _, err := parseJSON([]byte(`{} x`)); err == nil {
		t.Error("parseJSON accepted text after the value")
	}
}

type stringsBuilder struct{ strings.Builder }
