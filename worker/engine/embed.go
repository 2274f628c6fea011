package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/worker/model"
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
// Because the kernels give a row the same bits in any batch, an input's
// vector does not depend on the inputs beside it.
func (e *Engine) Embed(ctx context.Context, inputs [][]int32, opts EmbedOptions) ([][]float32, error) {
	pool := e.Pooling(opts.Pooling)
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

// Pooling is the pooling Embed applies given p: p itself, else the
// model's (<arch>.pooling_type), else mean.
func (e *Engine) Pooling(p model.Pooling) model.Pooling {
	if p == model.PoolNone {
		p = e.m.Pooling
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
		states := hidden[row*dim : (row+len(in))*dim]
		row += len(in)
		out[i] = poolStates(states, len(in), dim, pool, opts)
	}
	return nil
}

// poolStates pools n rows of dim states, truncates and normalises as opts
// say. Sums are taken in float64.
func poolStates(states []float32, n, dim int, pool model.Pooling, opts EmbedOptions) []float32 {
	v := make([]float32, dim)
	switch pool {
	case model.PoolCLS:
		copy(v, states[:dim])
	case model.PoolLast:
		copy(v, states[(n-1)*dim:])
	default:
		acc := make([]float64, dim)
		for r := 0; r < n; r++ {
			for j, x := range states[r*dim : (r+1)*dim] {
				acc[j] += float64(x)
			}
		}
		for j := range v {
			v[j] = float32(acc[j] / float64(n))
		}
	}
	if opts.Dimensions > 0 && opts.Dimensions < dim {
		v = v[:opts.Dimensions]
	}
	if !opts.Raw {
		normalize(v)
	}
	return v
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
