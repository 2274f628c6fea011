package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Roles a Message may have.
const (
	// RoleSystem is the role of instructions that frame the whole
	// conversation.
	RoleSystem = "system"
	// RoleUser is the role of the person talking to the model.
	RoleUser = "user"
	// RoleAssistant is the role of the model's own earlier replies.
	RoleAssistant = "assistant"
	// RoleTool is the role of a tool's result, answering an assistant's
	// tool call. Only templates with tool support accept it (see
	// Template.SupportsTools).
	RoleTool = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is RoleSystem, RoleUser or RoleAssistant.
	Role string
	// Content is the text of the turn. Templates that trim it (llama2,
	// llama3) do so as their reference template does.
	Content string
	// Reasoning is an assistant turn's reasoning, kept apart from Content
	// (the reasoning_content of the reference templates). Only qwen3 renders
	// it; when it is empty qwen3 looks for a "<think>…</think>" block in
	// Content instead.
	Reasoning string
	// ToolCalls are the calls an assistant turn made. Only templates with
	// tool support accept them.
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers (mistral-nemo
	// requires it: nine letters or digits).
	ToolCallID string
}

// ToolCall is one function call made by an assistant turn.
type ToolCall struct {
	// ID identifies the call (mistral-nemo requires nine letters or
	// digits; the others ignore it).
	ID string
	// Name is the function's name.
	Name string
	// Arguments is the JSON object of the call's arguments, as text (the
	// "arguments" string of the OpenAI API). Templates write it as their
	// tojson filter writes an object: `{"a": 1, "b": [2, 3]}`.
	Arguments string
}

// RenderOptions controls RenderWith.
type RenderOptions struct {
	// AddGenerationPrompt ends the text with the opening of an assistant
	// turn, so that the model's continuation is its reply.
	AddGenerationPrompt bool
	// EnableThinking is the thinking switch of the templates that have one
	// (qwen3: see SupportsThinking). nil leaves the template's default
	// (thinking on); a pointer to false makes the generation prompt end
	// with an empty "<think>\n\n</think>\n\n" block, so that the model
	// answers without reasoning. Templates without the switch ignore it.
	EnableThinking *bool
	// Tools are the function definitions offered to the model, each a
	// JSON object as the OpenAI API gives it ({"type": "function",
	// "function": {"name": …, "description": …, "parameters": …}}), written
	// into the prompt the way the template does. A template without tool
	// support refuses them (ErrToolsUnsupported).
	Tools []json.RawMessage
	// Today is the date llama3.1 writes in its system header ("Today Date:
	// 26 Jul 2024"). The zero value gives the reference template's own
	// fallback, 26 Jul 2024; pass time.Now() for the date a Python renderer
	// with strftime_now would write.
	Today time.Time
}

// family identifies a template; the zero value is the plain fallback.
type family uint8

const (
	familyPlain family = iota
	familyLlama2
	familyLlama3
	familyChatML
	familyZephyr
	familyLlama31
	familyQwen25
	familyQwen3
	familyGemma
	familyMistralNemo
	familyPhi3
)

// names is indexed by family.
var names = [...]string{
	familyPlain:       "plain",
	familyLlama2:      "llama2",
	familyLlama3:      "llama3",
	familyChatML:      "chatml",
	familyZephyr:      "zephyr",
	familyLlama31:     "llama3.1",
	familyQwen25:      "qwen2.5",
	familyQwen3:       "qwen3",
	familyGemma:       "gemma",
	familyMistralNemo: "mistral-nemo",
	familyPhi3:        "phi3",
}

// Template renders conversations in one chat format. Get one from Detect or
// Named; the zero value is the plain template. A Template is a small value,
// safe to copy and to use from several goroutines.
type Template struct {
	f family
}

// Names returns the names Named accepts, in a fixed order.
func Names() []string {
	return []string{"llama2", "llama3", "llama3.1", "chatml", "qwen2.5", "qwen3", "gemma", "mistral-nemo", "phi3", "zephyr", "plain"}
}

// Named returns the template family called name, one of Names(). Matching ignores case and surrounding
// spaces. Any other name yields an error matching ErrUnknownName.
func Named(name string) (Template, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for f, s := range names {
		if s == n {
			return Template{f: family(f)}, nil
		}
	}
	return Template{}, fmt.Errorf("%w %q: want one of %s", ErrUnknownName, name, strings.Join(Names(), ", "))
}

// Name returns the template's family name, as accepted by Named.
func (t Template) Name() string { return names[t.f] }

// String returns the template's name.
func (t Template) String() string { return t.Name() }

// AddsBOS reports whether Render writes the model's beginning-of-sequence
// marker into the text itself ("<s>" for llama2, "<|begin_of_text|>" for
// llama3), as the reference templates do. When it is true the caller must
// tokenize the prompt without adding another BOS token, and must let the
// tokenizer turn the marker text into the special token. When it is false
// the caller adds BOS or not as the model's tokenizer metadata says.
func (t Template) AddsBOS() bool {
	switch t.f {
	case familyLlama2, familyLlama3, familyLlama31, familyGemma, familyMistralNemo:
		return true
	}
	return false
}

// SupportsTools reports whether the template renders tool definitions
// (RenderOptions.Tools), assistant tool calls and RoleTool messages:
// llama3.1, qwen2.5, qwen3 and mistral-nemo.
func (t Template) SupportsTools() bool {
	switch t.f {
	case familyLlama31, familyQwen25, familyQwen3, familyMistralNemo:
		return true
	}
	return false
}

// SupportsThinking reports whether the template has the thinking switch
// (RenderOptions.EnableThinking) and renders reasoning: qwen3. The replies
// of such a model start with a "<think>…</think>" block; SplitReasoning
// separates it from the answer.
func (t Template) SupportsThinking() bool { return t.f == familyQwen3 }

// StopStrings returns the texts that end an assistant turn in this format:
// the end-of-turn marker and the start of the next turn, should the model
// skip the former. Generation should stop at the first of them; none of them
// belongs in the reply. The slice is new on every call.
func (t Template) StopStrings() []string {
	switch t.f {
	case familyLlama2:
		return []string{"</s>", "[INST]"}
	case familyLlama3:
		return []string{"<|eot_id|>", "<|end_of_text|>", "<|start_header_id|>"}
	case familyLlama31:
		return []string{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|start_header_id|>"}
	case familyChatML, familyQwen25, familyQwen3:
		return []string{"<|im_end|>", "<|im_start|>", "<|endoftext|>"}
	case familyGemma:
		return []string{"<end_of_turn>", "<start_of_turn>", "<eos>"}
	case familyMistralNemo:
		return []string{"</s>", "[INST]"}
	case familyPhi3:
		return []string{"<|end|>", "<|endoftext|>", "<|user|>"}
	case familyZephyr:
		return []string{"</s>", "<|user|>"}
	default:
		return []string{"\nUser:", "\nSystem:"}
	}
}

// Render returns the prompt text for a conversation: system, when not empty,
// as a leading system message, then msgs in order. With addGenerationPrompt
// the text ends with the opening of an assistant turn, so that the model's
// continuation is its reply. It is RenderWith with only
// AddGenerationPrompt set.
func (t Template) Render(system string, msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderWith(system, msgs, RenderOptions{AddGenerationPrompt: addGenerationPrompt})
}

// RenderWith returns the prompt text for a conversation: system, when not
// empty, as a leading system message, then msgs in order, rendered byte for
// byte as the family's reference template renders them (see the package
// documentation for each family's rules). The llama2 and mistral-nemo
// formats have no opening of an assistant turn (a user turn already ends in
// "[/INST]"), so there AddGenerationPrompt changes nothing.
//
// Every message must have one of the roles system, user or assistant, or
// tool where the template supports tools (ErrInvalidRole), and there must be
// something to render (ErrNoMessages). Tools, tool calls and tool messages
// given to a template without tool support are refused (ErrToolsUnsupported),
// never dropped; malformed ones give ErrInvalidTool. Where the reference
// template raises an error on the order of the roles (llama2, gemma,
// mistral-nemo: user and assistant must alternate), so does RenderWith
// (ErrRoleOrder).
//
// Content is inserted verbatim apart from the trimming the reference
// templates apply; RenderWith does not escape marker text inside content.
func (t Template) RenderWith(system string, msgs []Message, o RenderOptions) (string, error) {
	turns := make([]turn, 0, len(msgs)+1)
	if system != "" {
		turns = append(turns, turn{Message{Role: RoleSystem, Content: system}, -1})
	}
	for i, m := range msgs {
		turns = append(turns, turn{m, i})
	}
	if len(turns) == 0 {
		return "", fmt.Errorf("%w: give a system prompt or at least one message", ErrNoMessages)
	}
	tools := t.SupportsTools()
	if len(o.Tools) > 0 && !tools {
		return "", fmt.Errorf("%w: the %s template has no tool definitions (%d given)", ErrToolsUnsupported, t.Name(), len(o.Tools))
	}
	for _, tn := range turns {
		switch tn.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		case RoleTool:
			if !tools {
				return "", t.msgErr(tn, ErrToolsUnsupported, "the template has no tool messages")
			}
		default:
			want := "want system, user or assistant"
			if tools {
				want = "want system, user, assistant or tool"
			}
			return "", t.msgErr(tn, ErrInvalidRole, want)
		}
		if len(tn.ToolCalls) > 0 {
			if !tools {
				return "", t.msgErr(tn, ErrToolsUnsupported, "the template has no tool calls")
			}
			if tn.Role != RoleAssistant {
				return "", t.msgErr(tn, ErrInvalidTool, "only an assistant message can make tool calls")
			}
		}
	}
	r := renderer{t: t, o: o}
	var err error
	if len(o.Tools) > 0 {
		if r.tools, err = parseTools(o.Tools); err != nil {
			return "", err
		}
	}

	var b strings.Builder
	switch t.f {
	case familyLlama2:
		err = t.renderLlama2(&b, turns)
	case familyLlama3:
		renderLlama3(&b, turns, o.AddGenerationPrompt)
	case familyChatML:
		renderChatML(&b, turns, o.AddGenerationPrompt)
	case familyZephyr:
		renderZephyr(&b, turns, o.AddGenerationPrompt)
	case familyLlama31:
		err = r.llama31(&b, turns)
	case familyQwen25:
		err = r.qwen25(&b, turns)
	case familyQwen3:
		err = r.qwen3(&b, turns)
	case familyGemma:
		err = r.gemma(&b, turns)
	case familyMistralNemo:
		err = r.mistralNemo(&b, turns)
	case familyPhi3:
		r.phi3(&b, turns)
	default:
		renderPlain(&b, turns, o.AddGenerationPrompt)
	}
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// turn is a message with its index in the caller's list (-1: the system
// argument), kept for error messages.
type turn struct {
	Message
	index int
}

func (t Template) msgErr(tn turn, sentinel error, reason string) error {
	return &MessageError{Template: t.Name(), Index: tn.index, Role: tn.Role, Reason: reason, Err: sentinel}
}

// renderLlama2 follows the Llama 2 chat template: an optional leading system
// message is folded into the first user turn inside <<SYS>> tags; each user
// turn is "<s>[INST] … [/INST]" and each assistant turn " … </s>", with the
// turn's content stripped of surrounding white space.
func (t Template) renderLlama2(b *strings.Builder, turns []turn) error {
	sys, hasSys := "", false
	if turns[0].Role == RoleSystem {
		sys, hasSys = turns[0].Content, true
		turns = turns[1:]
	}
	if len(turns) == 0 {
		return &MessageError{Template: t.Name(), Index: -1, Role: RoleSystem,
			Reason: "the llama2 template needs a user message after the system prompt", Err: ErrRoleOrder}
	}
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
			return t.msgErr(tn, ErrRoleOrder, reason)
		}
		content := tn.Content
		if i == 0 && hasSys {
			content = "<<SYS>>\n" + sys + "\n<</SYS>>\n\n" + content
		}
		if tn.Role == RoleUser {
			b.WriteString("<s>[INST] ")
			b.WriteString(pyStrip(content))
			b.WriteString(" [/INST]")
		} else {
			b.WriteString(" ")
			b.WriteString(pyStrip(content))
			b.WriteString(" </s>")
		}
	}
	return nil
}

// renderLlama3 follows the Llama 3 instruct template: "<|begin_of_text|>"
// once, then per message a role header, a blank line, the trimmed content
// and "<|eot_id|>".
func renderLlama3(b *strings.Builder, turns []turn, gen bool) {
	b.WriteString("<|begin_of_text|>")
	for _, tn := range turns {
		b.WriteString("<|start_header_id|>")
		b.WriteString(tn.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(pyStrip(tn.Content))
		b.WriteString("<|eot_id|>")
	}
	if gen {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
}

// renderChatML writes "<|im_start|>role\ncontent<|im_end|>\n" per message.
func renderChatML(b *strings.Builder, turns []turn, gen bool) {
	for _, tn := range turns {
		b.WriteString("<|im_start|>")
		b.WriteString(tn.Role)
		b.WriteString("\n")
		b.WriteString(tn.Content)
		b.WriteString("<|im_end|>\n")
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
	}
}

// renderZephyr writes "<|role|>\ncontent</s>\n" per message.
func renderZephyr(b *strings.Builder, turns []turn, gen bool) {
	for _, tn := range turns {
		b.WriteString("<|")
		b.WriteString(tn.Role)
		b.WriteString("|>\n")
		b.WriteString(tn.Content)
		b.WriteString("</s>\n")
	}
	if gen {
		b.WriteString("<|assistant|>\n")
	}
}

// plainLabels is indexed by role for the plain template.
var plainLabels = map[string]string{
	RoleSystem:    "System: ",
	RoleUser:      "User: ",
	RoleAssistant: "Assistant: ",
}

// renderPlain writes "Role: content\n" per message and "Assistant:" as the
// generation prompt.
func renderPlain(b *strings.Builder, turns []turn, gen bool) {
	for _, tn := range turns {
		b.WriteString(plainLabels[tn.Role])
		b.WriteString(tn.Content)
		b.WriteString("\n")
	}
	if gen {
		b.WriteString("Assistant:")
	}
}

// pyStrip removes leading and trailing white space as Python's str.strip
// (and Jinja's trim filter) does: Go's Unicode white space plus the ASCII
// separators U+001C to U+001F.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
	})
}
