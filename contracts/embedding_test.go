package contracts

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDecodeEmbeddingRequest(t *testing.T) {
	t.Parallel()
	r, err := DecodeJobRequest([]byte(`{"model":"m","embedding":{"input":["a text",[1,2,3]],"dimensions":8}}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsEmbedding() || r.Embedding.Input[0].Text != "a text" || len(r.Embedding.Input[1].Tokens) != 3 || r.MaxTokens != 0 {
		t.Fatalf("decoded %+v (max_tokens %d)", r.Embedding, r.MaxTokens)
	}
	if got := r.Embedding.EstimatedInputTokens(); got != 6/4+1+3 {
		t.Errorf("estimated %d input tokens, want 5", got)
	}
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","embedding":{"input":[]}}`, "at least one input"},
		{`{"model":"m","embedding":{"input":[""]}}`, "input is empty"},
		{`{"model":"m","embedding":{"input":[[]]}}`, "input is empty"},
		{`{"model":"m","embedding":{"input":[[1,-2]]}}`, "not a token id"},
		{`{"model":"m","embedding":{"input":[[1,2.5]]}}`, "not a token id"},
		{`{"model":"m","embedding":{"input":[{"text":"x"}]}}`, "string or an array of token ids"},
		{`{"model":"m","embedding":{"input":["x"],"dimensions":-1}}`, "negative"},
		{`{"model":"m","embedding":{"input":["x"]},"messages":[{"role":"user","content":"hi"}]}`, "takes no messages"},
		{`{"model":"m","embedding":{"input":["x"]},"max_tokens":5}`, "takes no max_tokens"},
		{`{"model":"m","embedding":{"input":["x"]},"temperature":0.5}`, "takes no sampling"},
		{`{"model":"m","embedding":{"input":["x"]},"response_format":{"type":"regex","pattern":"a"}}`, "takes no response_format"},
		{`{"model":"m"}`, "at least one message"},
	} {
		_, err := DecodeJobRequest([]byte(c.body), Limits{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, CodeInvalidRequest) && !errors.Is(err, CodeMissingMessages) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	in := make([]string, MaxEmbeddingInputs+1)
	for i := range in {
		in[i] = `"x"`
	}
	if _, err := DecodeJobRequest([]byte(`{"model":"m","embedding":{"input":[`+strings.Join(in, ",")+`]}}`), Limits{}); err == nil || !strings.Contains(err.Error(), "above the limit") {
		t.Errorf("%d inputs: %v", len(in), err)
	}
}

// TestVectorJSON: a vector travels as base64 of little-endian float32,
// exactly, and reads back from that or from an array of numbers.
func TestVectorJSON(t *testing.T) {
	t.Parallel()
	v := Vector{0.5, -0.25, 1e-30, 3.4028235e38, 0}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"AAAAPwAAgL5gQqIN//9/fwAAAAA="` /* Python: base64(struct.pack("<5f", …)) */ {
		t.Errorf("encoded %s", b)
	}
	for _, in := range []string{string(b), `[0.5,-0.25,1e-30,3.4028235e38,0]`} {
		var got Vector
		if err := json.Unmarshal([]byte(in), &got); err != nil || !slices.Equal(got, v) {
			t.Errorf("%s: %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{`"AAA"`, `"!!!!"`, `{}`} {
		var got Vector
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if n := EmbeddingResultBytes(100, 1024); n < 100*4*1024*4/3 || n > 100*4*1024*4/3+100*8+(32<<10) {
		t.Errorf("EmbeddingResultBytes(100, 1024) = %d", n)
	}
}
