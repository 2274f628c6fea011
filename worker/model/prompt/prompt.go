package prompt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// ErrSystemWithoutChat is returned by Prompt for a system prompt outside
// chat mode: raw text has no place for one.
var ErrSystemWithoutChat = errors.New("prompt: a system prompt needs chat mode")

// ErrNoThinkingSwitch reports thinking asked of a chat template without a
// thinking switch (only qwen3's has one).
var ErrNoThinkingSwitch = errors.New("prompt: the chat template has no thinking switch")

// ErrTooLong is returned for a prompt whose length in bytes alone shows it
// cannot fit the model's context: it is refused before it is tokenized, so
// a megabyte of text costs a length check, not a tokenization.
var ErrTooLong = errors.New("prompt: longer than the context")

// Prompter turns text and conversations into prompt tokens for one model:
// its tokenizer and chat template, read from the GGUF metadata. It is safe
// for concurrent use.
type Prompter struct {
	File      *gguf.File
	Tokenizer *tokenizer.Tokenizer
	// Chat is the recognised chat template; ChatErr says why there is none
	// (an unknown template). A file without a template gets the plain one.
	Chat    chat.Template
	ChatErr error
	// Context is the model's context length in tokens (its
	// <arch>.context_length), 0 when the file does not say.
	Context int
}

// New reads the tokenizer and chat template of an opened file. The
// Prompter does not own f: whoever opened it closes it.
func New(f *gguf.File) (*Prompter, error) {
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	p := &Prompter{File: f, Tokenizer: tok}
	if n, ok := f.Uint(f.Architecture() + ".context_length"); ok && n <= 1<<31 {
		p.Context = int(n)
	}
	src, _ := f.String("tokenizer.chat_template")
	p.Chat, p.ChatErr = chat.Detect(src)
	return p, nil
}

// Open opens the GGUF file at path for its tokenizer and chat template
// only (the weights are not read); Close releases it.
func Open(path string) (*Prompter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	p, err := New(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Close releases the model file.
func (p *Prompter) Close() error { return p.File.Close() }

// Options describes how to turn text into prompt tokens.
type Options struct {
	// Chat treats the text as a user turn after System (see
	// Conversation); otherwise the text is tokenized raw with BOS, as
	// llama.cpp does.
	Chat   bool
	System string
	// Template overrides the model's template when Chat is set.
	Template *chat.Template
	// Thinking is the template's thinking switch when Chat is set (see
	// chat.RenderOptions.EnableThinking); nil leaves its default.
	Thinking *bool
}

// Prompt tokenizes text according to o.
func (p *Prompter) Prompt(text string, o Options) ([]int32, error) {
	if !o.Chat {
		if o.System != "" {
			return nil, ErrSystemWithoutChat
		}
		return p.encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	}
	return p.ConversationWith(o.System, []chat.Message{{Role: chat.RoleUser, Content: text}}, o.Template, chat.RenderOptions{EnableThinking: o.Thinking})
}

// Conversation tokenizes a system prompt and messages for generation. With
// a chat template (the model's, or tmpl when not nil) the turns are rendered
// through it with the generation prompt appended. A model without a chat
// template is a completion model (TinyStories, base models): the system
// prompt and the message contents are joined with blank lines and
// tokenized raw with BOS, so the model continues the text.
func (p *Prompter) Conversation(system string, msgs []chat.Message, tmpl *chat.Template) ([]int32, error) {
	return p.ConversationWith(system, msgs, tmpl, chat.RenderOptions{})
}

// Template returns the chat template a conversation is rendered with: tmpl
// when not nil, else the model's; ok is false for a model without one (a
// completion model) or with one not recognised.
func (p *Prompter) Template(tmpl *chat.Template) (t chat.Template, ok bool) {
	if tmpl != nil {
		return *tmpl, true
	}
	return p.Chat, p.ChatErr == nil && p.HasTemplate()
}

// Thinks reports whether a conversation rendered through tmpl (nil: the
// model's template) with the thinking switch asked (nil: the template's
// default) makes a thinking model's output, whose <think> block is split
// off (chat.ReasoningSplitter): the template has the switch (qwen3) and
// it is not off. Thinking asked of a template without the switch is
// ErrNoThinkingSwitch.
func (p *Prompter) Thinks(tmpl *chat.Template, asked *bool) (bool, error) {
	if t, ok := p.Template(tmpl); ok && t.SupportsThinking() {
		return asked == nil || *asked, nil
	}
	if asked != nil && *asked {
		return false, ErrNoThinkingSwitch
	}
	return false, nil
}

// ConversationWith is Conversation with render options (the thinking
// switch, tools); the generation prompt is always added.
func (p *Prompter) ConversationWith(system string, msgs []chat.Message, tmpl *chat.Template, o chat.RenderOptions) ([]int32, error) {
	t := p.Chat
	switch {
	case tmpl != nil:
		t = *tmpl
	case p.ChatErr != nil:
		return nil, fmt.Errorf("%w (choose a template by name: %v)", p.ChatErr, chat.Names())
	case !p.HasTemplate():
		var parts []string
		if system != "" {
			parts = append(parts, system)
		}
		for _, m := range msgs {
			parts = append(parts, m.Content)
		}
		return p.encode(strings.Join(parts, "\n\n"), tokenizer.EncodeOptions{AddSpecial: true})
	}
	o.AddGenerationPrompt = true
	s, err := t.RenderWith(system, msgs, o)
	if err != nil {
		return nil, err
	}
	return p.encode(s, tokenizer.EncodeOptions{AddSpecial: !t.AddsBOS(), ParseSpecial: true})
}

// encode tokenizes s, unless its length alone shows that it would not fit
// the context (ErrTooLong): n bytes are at least n / MaxPieceBytes tokens,
// and a prompt needs room for one generated token.
func (p *Prompter) encode(s string, o tokenizer.EncodeOptions) ([]int32, error) {
	if p.Context > 0 {
		piece := p.Tokenizer.MaxPieceBytes()
		if least := (len(s) + piece - 1) / piece; least >= p.Context {
			return nil, fmt.Errorf("%w: %d bytes of prompt are at least %d tokens (a token stands for at most %d bytes), and the context holds %d",
				ErrTooLong, len(s), least, piece, p.Context)
		}
	}
	return p.Tokenizer.Encode(s, o), nil
}

// HasTemplate reports whether the model file carries a chat template.
func (p *Prompter) HasTemplate() bool {
	s, _ := p.File.String("tokenizer.chat_template")
	return strings.TrimSpace(s) != ""
}

// Messages converts a job request's messages to chat turns.
func Messages(msgs []contracts.Message) []chat.Message {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		out[i] = chat.Message{Role: string(m.Role), Content: m.Content}
	}
	return out
}

// ContractError turns an error of Prompt or Conversation into its wire
// form: prompt_too_long for ErrTooLong, invalid_request otherwise (an
// unknown template, a turn the template cannot render).
func ContractError(err error) *contracts.Error {
	if errors.Is(err, ErrTooLong) {
		return contracts.NewError(contracts.CodePromptTooLong, "%v", err)
	}
	return contracts.NewError(contracts.CodeInvalidRequest, "%v", err)
}
