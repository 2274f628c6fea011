package contracts

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// MaxEmbeddingInputs caps the inputs of one embedding job (OpenAI's
// /v1/embeddings takes at most 2,048 per request).
const MaxEmbeddingInputs = 2048

// EmbeddingRequest makes a job an embedding job (JobRequest.Embedding):
// each input is run through the model once, prompt only, and its final
// hidden states are pooled as the model says (its GGUF
// <arch>.pooling_type: mean, cls or last; mean where it names none) and
// L2-normalised. Nothing is generated and no KV is kept after the job.
// The result carries one vector per input, in order (Result.Embeddings);
// usage counts every input token as input_tokens, with output_tokens 0
// and kind embedding. An embedding job has no messages, system prompt,
// sampling, tools or response format.
type EmbeddingRequest struct {
	// Input is what to embed: each a string (tokenized with the model's
	// tokenizer, its beginning-of-sequence token first where the model
	// adds one) or an array of token ids, used as given. 1 to
	// MaxEmbeddingInputs inputs, none empty.
	Input []EmbeddingInput `json:"input"`
	// Dimensions, when positive, keeps the first Dimensions components of
	// each vector (Matryoshka-trained models) and renormalises; at most
	// the model's width.
	Dimensions int `json:"dimensions,omitempty"`
}

// EmbeddingInput is one input of an embedding job: Text, or Tokens when
// Text is empty. On the wire it is a JSON string or an array of token
// ids.
type EmbeddingInput struct {
	Text   string
	Tokens []int32
}

// MarshalJSON writes the input as a string or an array of token ids.
func (in EmbeddingInput) MarshalJSON() ([]byte, error) {
	if in.Tokens != nil {
		return json.Marshal(in.Tokens)
	}
	return json.Marshal(in.Text)
}

// UnmarshalJSON reads a string or an array of token ids.
func (in *EmbeddingInput) UnmarshalJSON(b []byte) error {
	*in = EmbeddingInput{}
	if s := strings.TrimSpace(string(b)); strings.HasPrefix(s, "[") {
		return json.Unmarshal(b, &in.Tokens)
	}
	return json.Unmarshal(b, &in.Text)
}

// checkEmbeddingInputShape is checkShape for an EmbeddingInput: a string
// or an array of non-negative 32-bit integers.
func checkEmbeddingInputShape(v any, path string, ps *problems) {
	switch v := v.(type) {
	case string:
	case []any:
		for i, e := range v {
			n, ok := e.(json.Number)
			if !ok {
				ps.add(CodeInvalidRequest, fmt.Sprintf("%s[%d]", path, i), "a token id must be an integer, not %s", jsonKind(e))
				continue
			}
			if id, err := n.Int64(); err != nil || id < 0 || id > 1<<31-1 {
				ps.add(CodeInvalidRequest, fmt.Sprintf("%s[%d]", path, i), "%s is not a token id (a non-negative 32-bit integer)", n)
			}
		}
	default:
		ps.add(CodeInvalidRequest, path, "an input must be a string or an array of token ids, not %s", jsonKind(v))
	}
}

// IsEmbedding reports whether r is an embedding job.
func (r *JobRequest) IsEmbedding() bool { return r.Embedding != nil }

// validateEmbedding checks an embedding job: its inputs, and that it
// carries none of a generation's fields.
func (r *JobRequest) validateEmbedding(lim Limits, ps *problems) {
	e := r.Embedding
	switch n := len(e.Input); {
	case n == 0:
		ps.add(CodeInvalidRequest, "embedding.input", "at least one input is required")
	case n > MaxEmbeddingInputs:
		ps.add(CodeInvalidRequest, "embedding.input", "%d inputs is above the limit of %d", n, MaxEmbeddingInputs)
	}
	for i, in := range e.Input {
		if in.Text == "" && len(in.Tokens) == 0 {
			ps.add(CodeInvalidRequest, fmt.Sprintf("embedding.input[%d]", i), "input is empty")
		}
		for j, id := range in.Tokens {
			if id < 0 {
				ps.add(CodeInvalidRequest, fmt.Sprintf("embedding.input[%d][%d]", i, j), "token id %d is negative", id)
				break
			}
		}
	}
	if e.Dimensions < 0 {
		ps.add(CodeInvalidRequest, "embedding.dimensions", "dimensions %d is negative; leave it out for the model's width", e.Dimensions)
	}
	not := func(set bool, field string) {
		if set {
			ps.add(CodeInvalidRequest, field, "an embedding job takes no %s", field)
		}
	}
	not(len(r.Messages) > 0, "messages")
	not(r.System != "", "system")
	not(r.MaxTokens != 0, "max_tokens")
	not(r.Temperature != nil || r.TopP != nil || r.TopK != nil || r.MinP != nil || r.RepetitionPenalty != nil || r.Seed != nil || r.Preset != "", "sampling")
	not(len(r.StopSequences) > 0, "stop_sequences")
	not(r.Logprobs || r.TopLogprobs != 0, "logprobs")
	not(r.Stream, "stream")
	not(r.Thinking != nil, "thinking")
	not(r.ResponseFormat != nil, "response_format")
	not(len(r.Tools) > 0, "tools")
	not(r.OnToolFailure != "" || r.FallbackResponse != "", "on_tool_failure")
}

// EstimatedInputTokens estimates an embedding job's input tokens: token
// arrays as they are, strings at 4 bytes a token plus one.
func (e *EmbeddingRequest) EstimatedInputTokens() int {
	n := 0
	for _, in := range e.Input {
		n += in.EstimatedTokens()
	}
	return n
}

// EstimatedTokens is the input's tokens: a token array's length, or a
// string's bytes at 4 a token, plus one.
func (in EmbeddingInput) EstimatedTokens() int {
	if in.Tokens != nil {
		return len(in.Tokens)
	}
	return len(in.Text)/4 + 1
}

// Vector is an embedding (Result.Embeddings). On the wire it is the
// base64 of its components as little-endian float32 (what OpenAI's
// encoding_format base64 sends): 5⅓ bytes a component, half of JSON
// numbers, exact, so a result of many vectors stays within a NATS
// message. It also reads a JSON array of numbers.
type Vector []float32

// MarshalJSON writes the vector as base64 of little-endian float32.
func (v Vector) MarshalJSON() ([]byte, error) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// UnmarshalJSON reads base64 of little-endian float32, or an array of
// numbers.
func (v *Vector) UnmarshalJSON(b []byte) error {
	if s := strings.TrimSpace(string(b)); strings.HasPrefix(s, "[") {
		var xs []float32
		if err := json.Unmarshal(b, &xs); err != nil {
			return err
		}
		*v = xs
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		return fmt.Errorf("contracts: a vector is base64 of little-endian float32 (%d bytes, %v)", len(raw), err)
	}
	out := make(Vector, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	*v = out
	return nil
}

// EmbeddingResultBytes bounds the encoded size of a result carrying n
// vectors of dims components, everything but the vectors (usage,
// metadata) included at resultOverheadBytes: what a worker checks against
// its NATS server's maximum payload before it runs an embedding job.
func EmbeddingResultBytes(n, dims int) int {
	return n*(base64.StdEncoding.EncodedLen(4*dims)+3) + resultOverheadBytes
}

// EmbeddingsPerResult is the most vectors of dims components one result
// of at most maxBytes can carry (EmbeddingResultBytes), at most
// MaxEmbeddingInputs: how many inputs an embedding job may have under a
// NATS server's maximum payload.
func EmbeddingsPerResult(dims, maxBytes int) int {
	per := EmbeddingResultBytes(1, dims) - resultOverheadBytes
	return min(max(0, (maxBytes-resultOverheadBytes)/per), MaxEmbeddingInputs)
}

// resultOverheadBytes bounds a result's bytes besides its vectors: ids,
// usage, metadata (whose keys and values the request limits bound).
const resultOverheadBytes = 16 << 10
