package producer

import (
	"context"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// EmbedOpts are per-call options of Embed.
type EmbedOpts struct {
	// Dimensions, when positive, keeps the first Dimensions components of
	// each vector and renormalises (contracts.EmbeddingRequest). Defaults
	// to the model's width.
	Dimensions int
	// Priority is the job's priority. Defaults to normal.
	Priority contracts.Priority
	// WaitForModel queues the job for a worker of the model yet to start
	// instead of refusing it with unknown_model (see
	// contracts.JobRequest.WaitForModel). Defaults to false.
	WaitForModel bool
	// Metadata is copied into the job's result. Defaults to none.
	Metadata map[string]string
	// Submit are Submit's options (the trace to continue).
	Submit *SubmitOpts
}

// Embeddings are an embedding job's answer (Embed).
type Embeddings struct {
	// JobID is the job's id.
	JobID string
	// Vectors are the inputs' vectors, one per input in their order,
	// L2-normalised.
	Vectors [][]float32
	// Usage is the job's usage: InputTokens counts every input's tokens.
	Usage *contracts.Usage
}

// TextInputs returns texts as embedding inputs, for Embed.
func TextInputs(texts ...string) []contracts.EmbeddingInput {
	out := make([]contracts.EmbeddingInput, len(texts))
	for i, t := range texts {
		out[i].Text = t
	}
	return out
}

// Embed submits one embedding job for inputs (strings, or token ids
// used as given; see TextInputs) on model and waits for its result.
// Submit's refusals are its errors (an empty input or an unknown model,
// an input longer than the model's context), and so is a job that failed
// or was canceled: its result's error, a *contracts.Error. When ctx ends
// before the result, the job is canceled, since nobody will read its
// vectors, and ctx's error is returned.
//
//	e, err := c.Embed(ctx, "qwen3-embedding", producer.TextInputs("a cat", "a dog"), nil)
//	// e.Vectors[0], e.Vectors[1], e.Usage.InputTokens
func (c *Client) Embed(ctx context.Context, model string, inputs []contracts.EmbeddingInput, opts *EmbedOpts) (*Embeddings, error) {
	if opts == nil {
		opts = &EmbedOpts{}
	}
	req := &contracts.JobRequest{Model: model, Priority: opts.Priority, WaitForModel: opts.WaitForModel, Metadata: opts.Metadata,
		Embedding: &contracts.EmbeddingRequest{Input: inputs, Dimensions: opts.Dimensions}}
	id, err := c.Submit(ctx, req, opts.Submit)
	if err != nil {
		return nil, err
	}
	res, err := c.Wait(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), embedCancelTimeout)
			c.Cancel(cctx, id) // best effort: the job may have ended
			cancel()
		}
		return nil, err
	}
	if res.Status != contracts.StatusCompleted {
		if res.Error != nil {
			return nil, res.Error
		}
		return nil, contracts.NewError(contracts.CodeInternal, "embedding job %s ended %s", id, res.Status)
	}
	if len(res.Embeddings) != len(inputs) {
		return nil, contracts.NewError(contracts.CodeInternal, "embedding job %s answered %d vectors for %d inputs", id, len(res.Embeddings), len(inputs))
	}
	vs := make([][]float32, len(res.Embeddings))
	for i, v := range res.Embeddings {
		vs[i] = v
	}
	return &Embeddings{JobID: id, Vectors: vs, Usage: res.Usage}, nil
}

// embedCancelTimeout bounds the cancel of a job Embed no longer waits for.
const embedCancelTimeout = 10 * time.Second
