package chat

import (
	"fmt"
	"strings"
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
)

// Message is one turn of a conversation.
type Message struct {
	// Role is RoleSystem, RoleUser or RoleAssistant.
	Role string
	// Content is the text of the turn. Templates that trim it (llama2,
	// llama3) do so as their reference template does.
	Content string
}

// family identifies a template; the zero value is the plain fallback.
type family uint8

const (
	familyPlain family = iota
	familyLlama2
	familyLlama3
	familyChatML
	familyZephyr
)

// names is indexed by family.
var names = [...]string{
	familyPlain:  "plain",
	familyLlama2: "llama2",
	familyLlama3: "llama3",
	familyChatML: "chatml",
	familyZephyr: "zephyr",
}

// Template renders conversations in one chat format. Get one from Detect or
// Named; the zero value is the plain template. A Template is a small value,
// safe to copy and to use from several goroutines.
type Template struct {
	f family
}

// Names returns the names Named accepts, in a fixed order.
func Names() []string {
	return []string{"llama2", "llama3", "chatml", "zephyr", "plain"}
}

// Named returns the template family called name: "llama2", "llama3",
// "chatml", "zephyr" or "plain". Matching ignores case and surrounding
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
	return t.f == familyLlama2 || t.f == familyLlama3
}

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
	case familyChatML:
		return []string{"<|im_end|>", "<|im_start|>", "<|endoftext|>"}
	case familyZephyr:
		return []string{"</s>", "<|user|>"}
	default:
		return []string{"\nUser:", "\nSystem:"}
	}
}

// Render returns the prompt text for a conversation: system, when not empty,
// as a leading system message, then msgs in order. With addGenerationPrompt
// the text ends with the opening of an assistant turn, so that the model's
// continuation is its reply. The llama2 format has no such opening (a user
// turn already ends in "[/INST]"), so there the flag changes nothing.
//
// Every message must have one of the three roles (ErrInvalidRole), and there
// must be something to render (ErrNoMessages). llama2 further requires what
// its reference template enforces: at most one system message, first, then
// turns alternating user, assistant, user, … (ErrRoleOrder). The other
// formats accept any order, as their reference templates do.
//
// Content is inserted verbatim apart from the trimming the reference
// templates apply; Render does not escape marker text inside content.
func (t Template) Render(system string, msgs []Message, addGenerationPrompt bool) (string, error) {
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
	for _, tn := range turns {
		switch tn.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			return "", t.msgErr(tn, ErrInvalidRole, "want system, user or assistant")
		}
	}

	var b strings.Builder
	var err error
	switch t.f {
	case familyLlama2:
		err = t.renderLlama2(&b, turns)
	case familyLlama3:
		renderLlama3(&b, turns, addGenerationPrompt)
	case familyChatML:
		renderChatML(&b, turns, addGenerationPrompt)
	case familyZephyr:
		renderZephyr(&b, turns, addGenerationPrompt)
	default:
		renderPlain(&b, turns, addGenerationPrompt)
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
