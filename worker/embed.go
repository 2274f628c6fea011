package worker

import (
	"context"
	"errors"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/sched"
)

// embeddingInputs turns an embedding job's inputs into token ids: token
// arrays as given, strings tokenized as llama.cpp's embedding tool does
// (the model's beginning-of-sequence token first where it adds one, no
// chat template).
func embeddingInputs(l *engine.Loaded, name string, job *Job) ([][]int32, error) {
	e := job.Request.Embedding
	if e.Dimensions > l.Model.Dim {
		return nil, contracts.NewError(contracts.CodeInvalidRequest, "dimensions %d is above model %s's width of %d", e.Dimensions, name, l.Model.Dim)
	}
	dims := l.Model.Dim
	if e.Dimensions > 0 {
		dims = e.Dimensions
	}
	if lim := job.MaxResultBytes; lim > 0 && len(e.Input) > contracts.EmbeddingsPerResult(dims, lim) {
		most := contracts.EmbeddingsPerResult(dims, lim)
		return nil, contracts.NewError(contracts.CodeRequestTooLarge, "%d vectors of %d components do not fit in one result (the NATS server's maximum payload is %d bytes): send at most %d inputs a job to model %s, or ask for fewer dimensions",
			len(e.Input), dims, lim, most, name)
	}
	ids := make([][]int32, len(e.Input))
	for i, in := range e.Input {
		if in.Tokens != nil {
			ids[i] = in.Tokens
			continue
		}
		t, err := l.Prompt(in.Text, prompt.Options{})
		if err != nil {
			return nil, prompt.ContractError(err)
		}
		ids[i] = t
	}
	for i, t := range ids {
		if len(t) > l.Model.Context {
			return nil, contracts.NewError(contracts.CodePromptTooLong, "embedding input %d is %d tokens; model %s has a context of %d", i, len(t), name, l.Model.Context)
		}
	}
	return ids, nil
}

// embeddingOutcome is an embedding job's outcome: its vectors, and usage
// counting every input token as input.
func embeddingOutcome(l *engine.Loaded, inputs [][]int32, vecs [][]float32, st sched.Stats, began time.Time) *Outcome {
	out := &Outcome{Embeddings: vecs}
	u := &out.Usage
	u.Kind = contracts.KindEmbedding
	for _, in := range inputs {
		u.InputTokens += len(in)
	}
	u.TotalMs = float64(time.Since(began).Microseconds()) / 1000
	u.MemoryAllocatedMB = float64(st.KVBytes) / (1 << 20)
	u.Preemptions, u.RecomputedTokens = st.Preemptions, st.RecomputedTokens
	u.QueueMs = st.QueueMs
	u.Architecture = l.Model.Arch
	return out
}

// executeEmbedding runs an embedding job through its model's scheduler.
func (x *SchedExecutor) executeEmbedding(ctx context.Context, job *Job, sm *ScheduledModel, opts sched.JobOpts) (*Outcome, error) {
	inputs, err := embeddingInputs(sm.Loaded, sm.Name, job)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	vecs, st, err := sm.Scheduler.Embed(ctx, inputs, engine.EmbedOptions{Dimensions: job.Request.Embedding.Dimensions}, opts)
	switch {
	case err != nil && ctx.Err() != nil:
		// Canceled (or past its deadline): what ran is billed, nothing
		// is returned.
		out := embeddingOutcome(sm.Loaded, inputs, nil, st, began)
		out.Canceled = true
		return out, nil
	case errors.Is(err, sched.ErrTooLarge):
		return nil, contracts.NewError(contracts.CodeMemoryLimit, "%v", err)
	case errors.Is(err, sched.ErrStopped):
		return nil, contracts.NewError(contracts.CodeWorkerShutdown, "%v", err)
	case err != nil:
		return nil, engineError(err)
	}
	return embeddingOutcome(sm.Loaded, inputs, vecs, st, began), nil
}

// executeEmbedding runs an embedding job alone on its model's engine.
func (x *InOrderExecutor) executeEmbedding(ctx context.Context, job *Job, sm *ServedModel) (*Outcome, error) {
	inputs, err := embeddingInputs(sm.Loaded, sm.Name, job)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	began := time.Now()
	vecs, err := sm.Engine.Embed(ctx, inputs, engine.EmbedOptions{Dimensions: job.Request.Embedding.Dimensions})
	if err != nil {
		return nil, engineError(err)
	}
	return embeddingOutcome(sm.Loaded, inputs, vecs, sched.Stats{}, began), nil
}
