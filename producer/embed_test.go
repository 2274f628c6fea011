package producer_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestEmbed: the client's Embed runs an embedding job on a real worker
// and returns one unit vector per input, in order, with the job's usage;
// an input has the same vector alone and among others, as text and as its
// token ids; dimensions shortens the vectors; bad inputs and a model not
// served are refused at submit with their codes.
func TestEmbed(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := b.Client

	one, err := c.Embed(ctx, workertest.ModelName, producer.TextInputs("Once upon a time"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Vectors) != 1 || one.JobID == "" || one.Usage == nil || one.Usage.Kind != contracts.KindEmbedding || one.Usage.InputTokens == 0 || one.Usage.OutputTokens != 0 {
		t.Fatalf("one input: %+v, usage %+v", one, one.Usage)
	}
	v := one.Vectors[0]
	if n := norm(v); math.Abs(n-1) > 1e-5 {
		t.Fatalf("norm %v", n)
	}

	many, err := c.Embed(ctx, workertest.ModelName, producer.TextInputs("The dog ran.", "Once upon a time"), &producer.EmbedOpts{Priority: contracts.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	if len(many.Vectors) != 2 || !slices.Equal(many.Vectors[1], v) || slices.Equal(many.Vectors[0], v) {
		t.Fatalf("two inputs: %d vectors, the same input's the same: %v", len(many.Vectors), len(many.Vectors) == 2 && slices.Equal(many.Vectors[1], v))
	}

	short, err := c.Embed(ctx, workertest.ModelName, []contracts.EmbeddingInput{{Tokens: []int32{1, 20, 30}}}, &producer.EmbedOpts{Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(short.Vectors[0]) != 8 || math.Abs(norm(short.Vectors[0])-1) > 1e-5 || short.Usage.InputTokens != 3 {
		t.Fatalf("dimensions 8: %v, usage %+v", short.Vectors, short.Usage)
	}

	for _, tc := range []struct {
		name    string
		model   string
		inputs  []contracts.EmbeddingInput
		wantErr contracts.Code
	}{
		{"no inputs", workertest.ModelName, nil, contracts.CodeInvalidRequest},
		{"an empty input", workertest.ModelName, producer.TextInputs("a", ""), contracts.CodeInvalidRequest},
		{"a model not served", "gpt-0", producer.TextInputs("a"), contracts.CodeUnknownModel},
		{"longer than the context", workertest.ModelName, []contracts.EmbeddingInput{{Tokens: make([]int32, 5000)}}, contracts.CodePromptTooLong},
	} {
		if _, err := c.Embed(ctx, tc.model, tc.inputs, nil); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.wantErr)
		}
	}
	// A job the worker fails: its result's error.
	var ce *contracts.Error
	if _, err := c.Embed(ctx, workertest.ModelName, producer.TextInputs("a"), &producer.EmbedOpts{Dimensions: 1 << 20}); !errors.As(err, &ce) || ce.Code != contracts.CodeInvalidRequest {
		t.Errorf("dimensions above the width: %v, want the job's invalid_request", err)
	}
}

// norm is v's Euclidean length.
func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}
