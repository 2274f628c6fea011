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
}

// New reads the tokenizer and chat template of an opened file. The
// Prompter does not own f: whoever opened it closes it.
func New(f *gguf.File) (*Prompter, error) {
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	p := &Prompter{File: f, Tokenizer: tok}
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
}

// Prompt tokenizes text according to o.
func (p *Prompter) Prompt(text string, o Options) ([]int32, error) {
	if !o.Chat {
		if o.System != "" {
			return nil, ErrSystemWithoutChat
		}
		return p.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}), nil
	}
	return p.Conversation(o.System, []chat.Message{{Role: chat.RoleUser, Content: text}}, o.Template)
}

// Conversation tokenizes a system prompt and messages for generation. With
// a chat template (the model's, or tmpl when not nil) the turns are rendered
// through it with the generation prompt appended. A model without a chat
// template is a completion model (TinyStories, base models): the system
// prompt and the message contents are joined with blank lines and
// tokenized raw with BOS, so the model continues the text.
func (p *Prompter) Conversation(system string, msgs []chat.Message, tmpl *chat.Template) ([]int32, error) {
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
		return p.Tokenizer.Encode(strings.Join(parts, "\n\n"), tokenizer.EncodeOptions{AddSpecial: true}), nil
	}
	s, err := t.Render(system, msgs, true)
	if err != nil {
		return nil, err
	}
	return p.Tokenizer.Encode(s, tokenizer.EncodeOptions{AddSpecial: !t.AddsBOS(), ParseSpecial: true}), nil
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
