package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
	"github.com/zerolayer/zerolayer/worker/model/tokenizer"
)

// EmbedOptions says how Embed pools and shapes a vector.
type EmbedOptions struct {
	// Pooling overrides the model's (<arch>.pooling_type); PoolNone takes
	// the model's, and mean where the model names none.
	Pooling model.Pooling
	// Dimensions, if positive and below the model's width, keeps the first
	// Dimensions components (Matryoshka-trained models) before normalising.
	Dimensions int
	// Raw leaves the vector as pooled, not L2-normalised.
	Raw bool
}

// Embed runs each input (token ids, special tokens included as the caller
// wants them) through the model and returns its pooled final hidden state,
// L2-normalised unless opts.Raw. The inputs run together in as few
// forward passes as the arena allows; their K and V are dropped after.
// An encoder (model.Config.Encoder: BERT) computes each input whole in
// one pass, every position attending to every other.
// Because the kernels give a row the same bits in any batch, an input's
// vector does not depend on the inputs beside it.
func (e *Engine) Embed(ctx context.Context, inputs [][]int32, opts EmbedOptions) ([][]float32, error) {
	pool := ResolvePooling(e.m, opts.Pooling)
	for i, in := range inputs {
		if len(in) == 0 {
			return nil, fmt.Errorf("%w: input %d has no tokens", ErrEmptyPrompt, i)
		}
		if len(in) > e.m.Context {
			return nil, fmt.Errorf("%w: input %d has %d tokens, the context is %d", ErrPromptTooLong, i, len(in), e.m.Context)
		}
		if e.blocksFor(len(in)) > e.kv.capacity() {
			return nil, fmt.Errorf("%w: input %d needs %d blocks of %d tokens, the arena has %d", ErrNoMemory, i, e.blocksFor(len(in)), e.cfg.BlockTokens, e.kv.capacity())
		}
	}
	out := make([][]float32, len(inputs))
	for lo := 0; lo < len(inputs); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// As many inputs as the arena holds at once.
		hi, blocks := lo, 0
		for hi < len(inputs) && blocks+e.blocksFor(len(inputs[hi])) <= e.kv.capacity() {
			blocks += e.blocksFor(len(inputs[hi]))
			hi++
		}
		if err := e.embedPass(inputs[lo:hi], pool, opts, out[lo:hi]); err != nil {
			return nil, err
		}
		lo = hi
	}
	return out, nil
}

// ResolvePooling is the pooling an embedding of m applies given p: p
// itself, else the model's (<arch>.pooling_type), else mean.
func ResolvePooling(m *model.Model, p model.Pooling) model.Pooling {
	if p == model.PoolNone {
		p = m.Pooling
	}
	if p == model.PoolNone {
		p = model.PoolMean
	}
	return p
}

// embedPass runs inputs in one forward pass and pools each into out.
func (e *Engine) embedPass(inputs [][]int32, pool model.Pooling, opts EmbedOptions, out [][]float32) error {
	var toks, pos, seq []int32
	tables := make([][]int32, len(inputs))
	defer func() {
		for _, t := range tables {
			e.kv.release(t)
		}
	}()
	for i, in := range inputs {
		for len(tables[i]) < e.blocksFor(len(in)) {
			tables[i] = append(tables[i], e.kv.take())
		}
		for j, t := range in {
			toks = append(toks, t)
			pos = append(pos, int32(j))
			seq = append(seq, int32(i))
		}
	}
	dim := e.m.Dim
	hidden := make([]float32, len(toks)*dim)
	if err := e.m.ForwardHidden(e.kv.arena, toks, &gpu.Batch{Pos: pos, Seq: seq, Tables: tables}, hidden); err != nil {
		return err
	}
	row := 0
	for i, in := range inputs {
		p := NewPooler(e.m, len(in), pool)
		for r := range in {
			p.Add(r, hidden[(row+r)*dim:(row+r+1)*dim])
		}
		row += len(in)
		v, err := p.Vector(opts)
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

// Pooler pools an input's final hidden states as they are computed, a
// row at a time in position order, possibly over several forward passes
// (a scheduler's prompt chunks). Sums are taken in float64, in position
// order, so an input pooled in chunks gets the bits it gets in one pass.
type Pooler struct {
	m      *model.Model
	pool   model.Pooling
	dim, n int
	next   int       // the next position to take
	sum    []float64 // mean
	row    []float32 // cls, last
}

// NewPooler pools an input of n tokens of m; pool is resolved already
// (ResolvePooling).
func NewPooler(m *model.Model, n int, pool model.Pooling) *Pooler {
	p := &Pooler{m: m, pool: pool, dim: m.Dim, n: n}
	if pool == model.PoolCLS || pool == model.PoolLast {
		p.row = make([]float32, p.dim)
	} else {
		p.sum = make([]float64, p.dim)
	}
	return p
}

// Needs reports whether the state of position pos is still to be taken:
// a position not taken yet (rows are taken once each, in order; a row
// computed again after a preemption has the same bits and is not taken
// twice) that the pooling uses (cls and last use one row each).
func (p *Pooler) Needs(pos int) bool {
	if pos < p.next || pos >= p.n {
		return false
	}
	switch p.pool {
	case model.PoolCLS:
		return pos == 0
	case model.PoolLast:
		return pos == p.n-1
	}
	return true
}

// Add takes the final hidden state of position pos (nil for a position
// the pooling does not need: Needs). A position already taken
// (recomputed after a preemption: the same bits) is skipped; a position
// past the next one is a caller's bug and panics.
func (p *Pooler) Add(pos int, state []float32) {
	if pos < p.next {
		return
	}
	if pos > p.next {
		panic(fmt.Sprintf("engine: pooler given position %d before %d", pos, p.next))
	}
	p.next++
	switch p.pool {
	case model.PoolCLS:
		if pos == 0 {
			copy(p.row, state)
		}
	case model.PoolLast:
		if pos == p.n-1 {
			copy(p.row, state)
		}
	default:
		for j, x := range state[:p.dim] {
			p.sum[j] += float64(x)
		}
	}
}

// Done reports whether every position has been taken.
func (p *Pooler) Done() bool { return p.next >= p.n }

// Vector is the pooled vector, through the model's dense projections
// where it has them (model.Model.Project, on its backend: call it where
// the model's forward calls are made), then truncated and normalised as
// opts say.
func (p *Pooler) Vector(opts EmbedOptions) ([]float32, error) {
	v := make([]float32, p.dim)
	if p.sum != nil {
		for j := range v {
			v[j] = float32(p.sum[j] / float64(p.n))
		}
	} else {
		copy(v, p.row)
	}
	if err := p.m.Project(v); err != nil {
		return nil, err
	}
	if opts.Dimensions > 0 && opts.Dimensions < p.dim {
		v = v[:opts.Dimensions]
	}
	if !opts.Raw {
		normalize(v)
	}
	return v, nil
}

// normalize scales v to unit L2 norm (a zero vector stays zero).
func normalize(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

// NewEmbeddingInput returns a generation that only carries an embedding
// input through a scheduler: its tokens are computed and nothing is
// sampled (MaxNew is 0). An input may fill the whole context. An
// encoder's input (model.Config.Encoder) must be computed whole, in one
// pass (the scheduler does).
func NewEmbeddingInput(m *model.Model, tok *tokenizer.Tokenizer, ids []int32) (*Generation, error) {
	if len(ids) == 0 {
		return nil, ErrEmptyPrompt
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("%w: token id %d is outside the vocabulary [0,%d)", ErrBadRequest, id, m.Vocab)
		}
	}
	if len(ids) > m.Context {
		return nil, fmt.Errorf("%w: %d tokens, the context holds %d", ErrPromptTooLong, len(ids), m.Context)
	}
	r := &Request{PromptIDs: ids, NoDrafts: true}
	g := &Generation{
		req:     r,
		res:     &Result{PromptIDs: ids},
		dec:     tok.NewDecoderAfter(ids[len(ids)-1]),
		tok:     tok,
		history: append([]int32(nil), ids...),
		context: m.Context,
		start:   time.Now(),
	}
	g.res.Usage.InputTokens = len(ids)
	return g, nil
}
