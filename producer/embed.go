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
	// JobID is the (first) job's id.
	JobID string
	// JobIDs are the ids of every job the inputs took, in input order
	// (one unless their vectors could not fit one result).
	JobIDs []string
	// Vectors are the inputs' vectors, one per input in their order,
	// L2-normalised.
	Vectors []contracts.Vector
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

// Embed embeds inputs (strings, or token ids used as given; see
// TextInputs) on model and waits for the vectors: one embedding job, or
// as many as it takes for every job's vectors to fit one NATS message
// (EmbeddingInputsPerJob), their vectors in the inputs' order and their
// usage summed (Embeddings.JobIDs lists them). Submit's refusals are its
// errors (an empty input or an unknown model, an input longer than the
// model's context), and so is a job that failed or was canceled: its
// result's error, a *contracts.Error; the other jobs are then canceled.
// When ctx ends before the vectors, the jobs are canceled, since nobody
// will read them, and ctx's error is returned.
//
//	e, err := c.Embed(ctx, "qwen3-embedding", producer.TextInputs("a cat", "a dog"), nil)
//	// e.Vectors[0], e.Vectors[1], e.Usage.InputTokens
func (c *Client) Embed(ctx context.Context, model string, inputs []contracts.EmbeddingInput, opts *EmbedOpts) (*Embeddings, error) {
	if opts == nil {
		opts = &EmbedOpts{}
	}
	parts := [][]contracts.EmbeddingInput{inputs}
	if per := c.EmbeddingInputsPerJob(model, opts.Dimensions); per > 0 && len(inputs) > per {
		parts = nil
		for lo := 0; lo < len(inputs); lo += per {
			parts = append(parts, inputs[lo:min(lo+per, len(inputs))])
		}
	}
	var ids []string
	cancelAll := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), embedCancelTimeout)
		defer cancel()
		for _, id := range ids {
			c.Cancel(cctx, id) // best effort: the job may have ended
		}
	}
	for _, part := range parts {
		req := &contracts.JobRequest{Model: model, Priority: opts.Priority, WaitForModel: opts.WaitForModel, Metadata: opts.Metadata,
			Embedding: &contracts.EmbeddingRequest{Input: part, Dimensions: opts.Dimensions}}
		id, err := c.Submit(ctx, req, opts.Submit)
		if err != nil {
			cancelAll()
			return nil, err
		}
		ids = append(ids, id)
	}
	out := &Embeddings{JobID: ids[0], JobIDs: ids, Usage: &contracts.Usage{}}
	for k, id := range ids {
		res, err := c.Wait(ctx, id)
		if err == nil && res.Status != contracts.StatusCompleted {
			if res.Error != nil {
				err = res.Error
			} else {
				err = contracts.NewError(contracts.CodeInternal, "embedding job %s ended %s", id, res.Status)
			}
		}
		if err != nil {
			cancelAll()
			return nil, err
		}
		if want := len(parts[k]); len(res.Embeddings) != want {
			cancelAll()
			return nil, contracts.NewError(contracts.CodeInternal, "embedding job %s answered %d vectors for %d inputs", id, len(res.Embeddings), want)
		}
		out.Vectors = append(out.Vectors, res.Embeddings...)
		if k == 0 && res.Usage != nil {
			*out.Usage = *res.Usage
		} else if res.Usage != nil {
			addEmbeddingUsage(out.Usage, res.Usage)
		}
	}
	return out, nil
}

// addEmbeddingUsage adds the usage of one of a request's embedding jobs
// to the sum of the others: tokens, memory and preemptions add up,
// times are the longest.
func addEmbeddingUsage(sum, u *contracts.Usage) {
	sum.InputTokens += u.InputTokens
	sum.MemoryAllocatedMB += u.MemoryAllocatedMB
	sum.Preemptions += u.Preemptions
	sum.RecomputedTokens += u.RecomputedTokens
	sum.QueueMs = max(sum.QueueMs, u.QueueMs)
	sum.TotalMs = max(sum.TotalMs, u.TotalMs)
}

// EmbeddingInputsPerJob is the most inputs one embedding job on model may
// have for its vectors (dims components; 0: the model's width) to fit one
// result under the NATS server's maximum payload
// (contracts.EmbeddingResultBytes), at most contracts.MaxEmbeddingInputs;
// 0 when the client does not know the model's width (no Config.Models
// file for it): a worker then refuses a job too big with
// request_too_large.
func (c *Client) EmbeddingInputsPerJob(model string, dims int) int {
	p, err := c.prompter(model)
	if err != nil || p == nil {
		return 0
	}
	width, ok := p.File.Uint(p.File.Architecture() + ".embedding_length")
	if !ok || width == 0 {
		return 0
	}
	if dims <= 0 || dims > int(width) {
		dims = int(width)
	}
	return max(contracts.EmbeddingsPerResult(dims, int(c.nc.MaxPayload())), 1)
}

// embedCancelTimeout bounds the cancel of a job Embed no longer waits for.
const embedCancelTimeout = 10 * time.Second
