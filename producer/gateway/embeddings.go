package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
)

// embeddingsEndpoint is OpenAI's embeddings API, POST /v1/embeddings, and
// the url of a batch line that calls it.
const embeddingsEndpoint = "/v1/embeddings"

// embeddingsRequest is an OpenAI embeddings request, mapped to one
// embedding job (contracts.EmbeddingRequest). Other fields are ignored.
type embeddingsRequest struct {
	Model string `json:"model"`
	// Input is a string, a list of strings, a list of token ids (one
	// input) or a list of lists of token ids (see embeddingInputs).
	Input json.RawMessage `json:"input"`
	// EncodingFormat is float (the default) or base64: each vector's
	// float32 components, little-endian, in standard base64.
	EncodingFormat string `json:"encoding_format"`
	Dimensions     *int   `json:"dimensions"`
	// User is accepted and not used.
	User string `json:"user"`
	// WaitForModel is zerolayer's, as the chat completions request's.
	WaitForModel bool `json:"wait_for_model"`
}

// base64 reports whether the vectors are asked for in base64.
func (er *embeddingsRequest) base64() bool { return er.EncodingFormat == "base64" }

// job maps the request to an embedding job. What the OpenAI API would
// refuse is refused here, naming the request's own field (input[2],
// dimensions); the rest is the contract's to check at submit.
func (er *embeddingsRequest) job() (*contracts.JobRequest, *contracts.Error) {
	switch er.EncodingFormat {
	case "", "float", "base64":
	default:
		return nil, paramError("encoding_format", "%q: want float or base64", er.EncodingFormat)
	}
	if er.Dimensions != nil && *er.Dimensions < 1 {
		return nil, paramError("dimensions", "%d: want at least 1, or leave it out for the model's width", *er.Dimensions)
	}
	inputs, e := embeddingInputs(er.Input)
	if e != nil {
		return nil, e
	}
	req := &contracts.JobRequest{Model: er.Model, Embedding: &contracts.EmbeddingRequest{Input: inputs}, WaitForModel: er.WaitForModel}
	if er.Dimensions != nil {
		req.Embedding.Dimensions = *er.Dimensions
	}
	return req, nil
}

// embeddingInputs reads the input of an embeddings request: a string (one
// input), a list of strings, a list of token ids (one input, as OpenAI
// reads it) or a list of lists of token ids (one input each). A list may
// mix strings and lists of token ids. No input may be empty, and there are
// 1 to contracts.MaxEmbeddingInputs of them.
func embeddingInputs(raw json.RawMessage) ([]contracts.EmbeddingInput, *contracts.Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, paramError("input", "input is required: a string, a list of strings, a list of token ids or a list of lists of token ids")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // token ids stay exact, and a fraction is seen
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, contracts.NewError(contracts.CodeMalformedJSON, "input: %v", err)
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			return nil, paramError("input", "input is an empty string")
		}
		return []contracts.EmbeddingInput{{Text: v}}, nil
	case []any:
		switch n := len(v); {
		case n == 0:
			return nil, paramError("input", "input is an empty list")
		case n > contracts.MaxEmbeddingInputs:
			return nil, paramError("input", "%d inputs is above the limit of %d per request", n, contracts.MaxEmbeddingInputs)
		}
		if _, ok := v[0].(json.Number); ok {
			// A list of token ids is one input.
			ids, e := tokenIDs(v, "input")
			if e != nil {
				return nil, e
			}
			return []contracts.EmbeddingInput{{Tokens: ids}}, nil
		}
		out := make([]contracts.EmbeddingInput, len(v))
		for i, in := range v {
			field := fmt.Sprintf("input[%d]", i)
			switch in := in.(type) {
			case string:
				if in == "" {
					return nil, paramError(field, "input %d is an empty string", i)
				}
				out[i].Text = in
			case []any:
				if len(in) == 0 {
					return nil, paramError(field, "input %d is an empty list of token ids", i)
				}
				ids, e := tokenIDs(in, field)
				if e != nil {
					return nil, e
				}
				out[i].Tokens = ids
			default:
				return nil, paramError(field, "an input in a list is a string or a list of token ids, not %s", jsonKind(in))
			}
		}
		return out, nil
	default:
		return nil, paramError("input", "want a string, a list of strings, a list of token ids or a list of lists of token ids, not %s", jsonKind(v))
	}
}

// tokenIDs reads a list of token ids (non-negative 32-bit integers), the
// list at field.
func tokenIDs(v []any, field string) ([]int32, *contracts.Error) {
	ids := make([]int32, len(v))
	for i, e := range v {
		n, ok := e.(json.Number)
		if !ok {
			return nil, paramError(fmt.Sprintf("%s[%d]", field, i), "a token id is an integer, not %s (a list of token ids is one input; several inputs are a list of strings or of lists)", jsonKind(e))
		}
		id, err := n.Int64()
		if err != nil || id < 0 || id > math.MaxInt32 {
			return nil, paramError(fmt.Sprintf("%s[%d]", field, i), "%s is not a token id (a non-negative 32-bit integer)", n)
		}
		ids[i] = int32(id)
	}
	return ids, nil
}

// jsonKind names the kind of a decoded JSON value, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	default:
		return "an object"
	}
}

// paramError is an invalid_request error about the request field param.
func paramError(param, format string, args ...any) *contracts.Error {
	return &contracts.Error{Code: contracts.CodeInvalidRequest, Field: param, Message: fmt.Sprintf(format, args...)}
}

// embeddingError answers an embeddings call's error as openAIError does,
// naming the field as the caller sent it: the contract's
// embedding.input[2] is the request's input[2].
func embeddingError(w http.ResponseWriter, e *contracts.Error) {
	openAIError(w, openAIField(e))
}

// openAIField is e with a field of the embedding job renamed to the
// embeddings request's own.
func openAIField(e *contracts.Error) *contracts.Error {
	if e == nil || !strings.HasPrefix(e.Field, "embedding.") {
		return e
	}
	c := *e
	c.Field = strings.TrimPrefix(e.Field, "embedding.")
	return &c
}

// embeddingObject is one vector of an embeddings answer: a list of
// numbers, or a base64 string.
type embeddingObject struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// embeddingsUsage is an embeddings answer's usage: every input token.
type embeddingsUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// embeddingsResponse is the embeddings API's answer for a completed
// embedding job's result, the vectors in base64 when b64. A result
// without one vector per input (inputs of them) is an error: the job did
// not do what was asked.
func embeddingsResponse(model string, res *contracts.Result, inputs int, b64 bool) (map[string]any, *contracts.Error) {
	if len(res.Embeddings) != inputs || inputs == 0 {
		return nil, contracts.NewError(contracts.CodeInternal, "job %s answered %d vectors for %d inputs", res.JobID, len(res.Embeddings), inputs)
	}
	data := make([]embeddingObject, len(res.Embeddings))
	for i, v := range res.Embeddings {
		// A contracts.Vector writes itself as the base64 of its
		// little-endian float32 components, as the OpenAI SDKs decode
		// encoding_format base64; as []float32, a list of numbers.
		data[i] = embeddingObject{Object: "embedding", Index: i, Embedding: []float32(v)}
		if b64 {
			data[i].Embedding = v
		}
	}
	var u embeddingsUsage
	if res.Usage != nil {
		u.PromptTokens = res.Usage.InputTokens
		u.TotalTokens = res.Usage.InputTokens + res.Usage.OutputTokens
	}
	return map[string]any{"object": "list", "data": data, "model": model, "usage": u}, nil
}

// embeddings: POST /v1/embeddings, through producer.Client.Embed: one
// embedding job, or as many as it takes for each job's vectors to fit one
// NATS message (up to 2,048 inputs of a wide model are several jobs),
// answered in the inputs' order with their usage summed and their ids in
// the job id header, comma separated. A job that fails fails the request;
// the others are canceled, as they all are when the caller goes away or
// SyncTimeout passes.
func (g *Gateway) embeddings(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		embeddingError(w, e)
		return
	}
	raw, e := g.body(w, r)
	if e != nil {
		embeddingError(w, e)
		return
	}
	var er embeddingsRequest
	if e := decodeJSON(raw, &er); e != nil {
		embeddingError(w, e)
		return
	}
	req, e := er.job()
	if e == nil {
		e = priority(r, req)
	}
	if e != nil {
		embeddingError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.SyncTimeout)
	defer cancel()
	got, err := c.Embed(ctx, req.Model, req.Embedding.Input, &producer.EmbedOpts{Dimensions: req.Embedding.Dimensions,
		Priority: req.Priority, WaitForModel: req.WaitForModel, Submit: submitOpts(r)})
	if err != nil {
		embeddingError(w, asError(err))
		return
	}
	w.Header().Set(JobIDHeader, strings.Join(got.JobIDs, ","))
	setRequestID(w, got.JobID)
	body, e := embeddingsResponse(req.Model, &contracts.Result{JobID: got.JobID, Embeddings: got.Vectors, Usage: got.Usage}, len(req.Embedding.Input), er.base64())
	if e != nil {
		embeddingError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, body)
}
