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

// Loaded is an opened model file: weights on a backend, its tokenizer and
// its chat template.
type Loaded struct {
	File      *gguf.File
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	// Chat is the recognised chat template; ChatErr says why there is none
	// (an unknown template). A file without a template gets the plain one.
	Chat    chat.Template
	ChatErr error
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
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() != m.Vocab {
		return nil, fmt.Errorf("%w: tokenizer has %d tokens, the embedding %d rows", model.ErrBadConfig, tok.VocabSize(), m.Vocab)
	}
	l := &Loaded{File: f, Model: m, Tokenizer: tok}
	src, _ := f.String("tokenizer.chat_template")
	l.Chat, l.ChatErr = chat.Detect(src)
	return l, nil
}

// Close releases the model file. The backend is the caller's.
func (l *Loaded) Close() error { return l.File.Close() }

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
func (l *Loaded) Prompt(text string, o PromptOptions) ([]int32, error) {
	if !o.Chat {
		if o.System != "" {
			return nil, fmt.Errorf("%w: a system prompt needs chat mode", ErrBadRequest)
		}
		return l.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}), nil
	}
	return l.Conversation(o.System, []chat.Message{{Role: chat.RoleUser, Content: text}}, o.Template)
}

// Conversation tokenizes a system prompt and messages for generation. With
// a chat template (the model's, or tmpl when not nil) the turns are rendered
// through it with the generation prompt appended. A model without a chat
// template is a completion model (TinyStories, base models): the system
// prompt and the message contents are joined with blank lines and
// tokenized raw with BOS, so the model continues the text.
func (l *Loaded) Conversation(system string, msgs []chat.Message, tmpl *chat.Template) ([]int32, error) {
	t := l.Chat
	switch {
	case tmpl != nil:
		t = *tmpl
	case l.ChatErr != nil:
		return nil, fmt.Errorf("%w (choose a template by name: %v)", l.ChatErr, chat.Names())
	case !l.HasTemplate():
		var parts []string
		if system != "" {
			parts = append(parts, system)
		}
		for _, m := range msgs {
			parts = append(parts, m.Content)
		}
		return l.Tokenizer.Encode(strings.Join(parts, "\n\n"), tokenizer.EncodeOptions{AddSpecial: true}), nil
	}
	s, err := t.Render(system, msgs, true)
	if err != nil {
		return nil, err
	}
	return l.Tokenizer.Encode(s, tokenizer.EncodeOptions{AddSpecial: !t.AddsBOS(), ParseSpecial: true}), nil
}

// HasTemplate reports whether the model file carries a chat template.
func (l *Loaded) HasTemplate() bool {
	s, _ := l.File.String("tokenizer.chat_template")
	return strings.TrimSpace(s) != ""
}
