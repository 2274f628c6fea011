package sched

import (
	"context"
	"errors"

	"github.com/zerolayer/zerolayer/worker/engine"
)

// embedSeq is what a sequence carrying an embedding input adds: its
// pooler, fed the input's final hidden states as steps compute them, and
// the vector once the last position is in.
type embedSeq struct {
	pool *engine.Pooler
	opts engine.EmbedOptions
	vec  []float32
}

// Embed runs each input (token ids) through the model as prompt-only
// sequences of one job and returns its pooled final hidden state, as
// engine.Embed does, with the same bits. The inputs are scheduled like
// any job's prompt (admitted by memory, their chunks packed into steps
// with other jobs' prompt chunks and decodes, preemptible, counted to the
// tenant's fair share) but sample nothing, and their KV blocks are given
// back when their last position is computed. An input may fill the
// model's context. The first input that fails fails the job, and the
// others are dropped. Its Stats are summed over the inputs, with QueueMs
// the longest an input waited.
func (s *Scheduler) Embed(ctx context.Context, inputs [][]int32, eopts engine.EmbedOptions, opts JobOpts) (_ [][]float32, st Stats, err error) {
	defer func() {
		if m := s.cfg.Metrics; m != nil && errors.Is(err, ErrTooLarge) {
			m.rejections.Inc()
		}
	}()
	if len(inputs) == 0 {
		return nil, Stats{}, engine.ErrEmptyPrompt
	}
	pool := engine.ResolvePooling(s.m, eopts.Pooling)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qs := make([]*seq, len(inputs))
	for i, in := range inputs {
		g, err := engine.NewEmbeddingInput(s.m, s.tok, in)
		if err != nil {
			return nil, Stats{}, err
		}
		q, err := s.newSeq(ctx, g, opts, false)
		if err != nil {
			return nil, Stats{}, err
		}
		q.emb = &embedSeq{pool: engine.NewPooler(s.m, len(in), pool), opts: eopts}
		qs[i] = q
	}
	sent := 0
	for _, q := range qs {
		if err = s.send(q); err != nil {
			break
		}
		sent++
	}
	out := make([][]float32, len(inputs))
	for i, q := range qs[:sent] {
		if werr := s.await(q); werr != nil && err == nil {
			err = werr
			cancel() // the rest are of no use now
		}
		if q.emb.vec == nil && err == nil {
			err = ctx.Err() // canceled before its last position
		}
		out[i] = q.emb.vec
		st.QueueMs = max(st.QueueMs, q.stats.QueueMs)
		st.QueueSteps = max(st.QueueSteps, q.stats.QueueSteps)
		st.CachedInputTokens += q.stats.CachedInputTokens
		st.Preemptions += q.stats.Preemptions
		st.RecomputedTokens += q.stats.RecomputedTokens
		st.Reserved = st.Reserved || q.stats.Reserved
		st.KVBytes += q.g.Result().Usage.KVBytes
	}
	if err != nil {
		return nil, st, err
	}
	return out, st, nil
}

// takeHidden feeds an embedding row's computed positions to its pooler,
// from hidden (the states of the rows forward asked for), and finishes
// the sequence once its last position is in.
func (s *Scheduler) takeHidden(q *seq, from, to int, hidden []float32, next *int) {
	dim := s.m.Dim
	for pos := from; pos < to; pos++ {
		var state []float32 // forward computed it only where the pooling needs it
		if q.emb.pool.Needs(pos) {
			state = hidden[*next*dim : (*next+1)*dim]
			*next++
		}
		q.emb.pool.Add(pos, state)
	}
	if q.emb.pool.Done() {
		vec, err := q.emb.pool.Vector(q.emb.opts) // its KV bytes were noted as it grew (noteMemory)
		q.emb.vec = vec
		s.finish(q, "", err)
	}
}

// encode runs a step of an encoder (model.Config.Encoder), whose rows are
// all whole embedding inputs, through its one pass (model.ForwardHidden)
// and keeps the states of the rows hrows asks for.
func (s *Scheduler) encode(toks, hrows []int32, hidden []float32) error {
	dim := s.m.Dim
	if need := len(toks) * dim; cap(s.buf.allHidden) < need {
		s.buf.allHidden = make([]float32, need)
	}
	all := s.buf.allHidden[:len(toks)*dim]
	if err := s.m.ForwardHidden(s.kv, toks, &s.buf.batches[0], all); err != nil {
		return err
	}
	for j, r := range hrows {
		copy(hidden[j*dim:(j+1)*dim], all[int(r)*dim:(int(r)+1)*dim])
	}
	return nil
}
