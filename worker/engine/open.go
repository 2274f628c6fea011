package engine

import (
	"fmt"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/gguf"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
)

// Loaded is an opened model file: weights on a backend plus its
// prompt.Prompter (tokenizer and chat template).
type Loaded struct {
	*prompt.Prompter
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
	p, err := prompt.New(f)
	if err != nil {
		return nil, err
	}
	// The embedding may have more rows than the tokenizer has tokens
	// (vocabularies padded to a multiple of 64 or 128): those ids are never
	// sampled (Generation.Observe masks them) and decode to nothing. Fewer
	// rows than tokens would let Encode produce ids the model cannot embed.
	if p.Tokenizer.VocabSize() > m.Vocab {
		return nil, fmt.Errorf("%w: tokenizer has %d tokens, the embedding only %d rows", model.ErrBadConfig, p.Tokenizer.VocabSize(), m.Vocab)
	}
	return &Loaded{Prompter: p, Model: m}, nil
}
