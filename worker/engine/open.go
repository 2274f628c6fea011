package engine

import (
	"fmt"

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
	// Chat renders System and the user text through the model's chat
	// template; otherwise the text is tokenized raw with BOS, as llama.cpp
	// does.
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
	tmpl := l.Chat
	if o.Template != nil {
		tmpl = *o.Template
	} else if l.ChatErr != nil {
		return nil, fmt.Errorf("%w (choose a template by name: %v)", l.ChatErr, chat.Names())
	}
	s, err := tmpl.Render(o.System, []chat.Message{{Role: "user", Content: text}}, true)
	if err != nil {
		return nil, err
	}
	return l.Tokenizer.Encode(s, tokenizer.EncodeOptions{AddSpecial: !tmpl.AddsBOS(), ParseSpecial: true}), nil
}
