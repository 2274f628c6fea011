package contracts

import (
	"errors"
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
