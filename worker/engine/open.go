package engine

import (
	"fmt"
	"strings"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/chat"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// Prompter turns text and conversations into prompt tokens for one model:
// its tokenizer and chat template, read from the GGUF metadata without the
// weights (producers use it to bucket jobs by prompt length).
type Prompter struct {
	File      *gguf.File
	Tokenizer *tokenizer.Tokenizer
	// Chat is the recognised chat template; ChatErr says why there is none
	// (an unknown template). A file without a template gets the plain one.
	Chat    chat.Template
	ChatErr error
}

// NewPrompter reads the tokenizer and chat template of an opened file.
func NewPrompter(f *gguf.File) (*Prompter, error) {
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	p := &Prompter{File: f, Tokenizer: tok}
	src, _ := f.String("tokenizer.chat_template")
	p.Chat, p.ChatErr = chat.Detect(src)
	return p, nil
}

// OpenPrompter opens the GGUF file at path for its tokenizer only; Close
// releases it.
func OpenPrompter(path string) (*Prompter, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	p, err := NewPrompter(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Close releases the model file.
func (p *Prompter) Close() error { return p.File.Close() }

// Loaded is an opened model file: weights on a backend plus its Prompter.
type Loaded struct {
	*Prompter
	Model *model.Model
}

// Load opens the GGUF file at path and uploads its weights to be.
func Load(path string, be gpu.Backend) (*Loaded, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	l, err := FromFile(f, be)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// FromFile builds a Loaded from an opened file; Close closes the file.
func FromFile(f *gguf.File, be gpu.Backend) (*Loaded, error) {
	m, err := model.New(f, be)
	if err != nil {
		return nil, err
	}
	p, err := NewPrompter(f)
	if err != nil {
		return nil, err
	}
	if p.Tokenizer.VocabSize() != m.Vocab {
		return nil, fmt.Errorf("%w: tokenizer has %d tokens, the embedding %d rows", model.ErrBadConfig, p.Tokenizer.VocabSize(), m.Vocab)
	}
	return &Loaded{Prompter: p, Model: m}, nil
}

// PromptOptions describes how to turn text into prompt tokens.
type PromptOptions struct {
	// Chat treats the text as a user turn after System (see
	// Conversation); otherwise the text is tokenized raw with BOS, as
	// llama.cpp does.
	Chat   bool
	System string
	// Template overrides the model's template when Chat is set.
	Template *chat.Template
}

// Prompt tokenizes text according to o.
func (p *Prompter) Prompt(text string, o PromptOptions) ([]int32, error) {
	if !o.Chat {
		if o.System != "" {
			return nil, fmt.Errorf("%w: a system prompt needs chat mode", ErrBadRequest)
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
