package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestEmbeddingJobs runs 240 embedding jobs from two tenants (strings and
// token arrays, one to eight inputs each, some cut to fewer dimensions)
// through JetStream and a scheduling worker, with generations among them:
// every embedding job completes once with one vector per input, each
// with the bits the engine gives the input alone, and one usage record of
// kind embedding counting its input tokens; bad jobs fail alone, with a
// stable code; the generations complete.
func TestEmbeddingJobs(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 16}), worker.Config{ID: "w1", Concurrency: 16})
	l := modeltest.LoadStories(t, 1)
	ref, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Once upon a time", "The little dog ran in the park.", strings.Repeat("Tom and Sue played with a big red ball in the sun. ", 20), "ü ß 日本 🙂", "a"}
	tokensOf := func(in contracts.EmbeddingInput) []int32 {
		if in.Tokens != nil {
			return in.Tokens
		}
		ids, err := l.Prompt(in.Text, prompt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	type job struct {
		id     string
		tenant string
		req    *contracts.JobRequest
		gen    bool
	}
	var jobs []job
	ctx := context.Background()
	for i := 0; i < 260; i++ {
		c := b.Client
		if i%3 == 1 {
			c = b.Other
		}
		var req *contracts.JobRequest
		if i%13 == 0 {
			req = request("Once upon a time", 8+i%5, contracts.PriorityNormal)
		} else {
			e := &contracts.EmbeddingRequest{}
			for k := 0; k <= i%8; k++ {
				if (i+k)%4 == 0 {
					e.Input = append(e.Input, contracts.EmbeddingInput{Tokens: []int32{1, int32(100 + i%50), int32(200 + k), 300}})
				} else {
					e.Input = append(e.Input, contracts.EmbeddingInput{Text: texts[(i+k)%len(texts)]})
				}
			}
			if i%5 == 0 {
				e.Dimensions = 16
			}
			req = &contracts.JobRequest{Model: workertest.ModelName, Priority: contracts.Priorities()[i%3], Embedding: e}
		}
		id, err := c.Submit(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{id: id, tenant: c.Tenant(), req: req, gen: req.Embedding == nil})
	}
	// Bad jobs: refused by the worker, each alone.
	bad := map[string]contracts.Code{}
	for _, c := range []struct {
		e    *contracts.EmbeddingRequest
		code contracts.Code
	}{
		{&contracts.EmbeddingRequest{Input: []contracts.EmbeddingInput{{Text: "x"}}, Dimensions: l.Model.Dim + 1}, contracts.CodeInvalidRequest},
		{&contracts.EmbeddingRequest{Input: []contracts.EmbeddingInput{{Text: "x"}, {Tokens: []int32{1, int32(l.Model.Vocab)}}}}, contracts.CodeInvalidRequest},
	} {
		id, err := b.Client.Submit(ctx, &contracts.JobRequest{Model: workertest.ModelName, Embedding: c.e}, nil)
		if err != nil {
			t.Fatal(err)
		}
		bad[id] = c.code
	}
	// An input over the context: refused at submit.
	if _, err := b.Client.Submit(ctx, &contracts.JobRequest{Model: workertest.ModelName, Embedding: &contracts.EmbeddingRequest{
		Input: []contracts.EmbeddingInput{{Tokens: make([]int32, l.Model.Context+1)}}}}, nil); !errors.Is(err, contracts.CodePromptTooLong) {
		t.Errorf("an input over the context: %v at submit", err)
	}
	refs := map[string][]float32{}
	for _, j := range jobs {
		c := b.Client
		if j.tenant != c.Tenant() {
			c = b.Other
		}
		res := wait(t, c, j.id)
		if res.Status != contracts.StatusCompleted {
			t.Fatalf("job %s: %+v", j.id, res)
		}
		if j.gen {
			if len(res.Embeddings) != 0 || res.StopReason == "" {
				t.Fatalf("generation %s: %+v", j.id, res)
			}
			continue
		}
		e := j.req.Embedding
		if len(res.Embeddings) != len(e.Input) || res.Usage == nil || res.Usage.Kind != contracts.KindEmbedding || res.Usage.OutputTokens != 0 {
			t.Fatalf("embedding job %s: %d vectors for %d inputs, usage %+v", j.id, len(res.Embeddings), len(e.Input), res.Usage)
		}
		tokens := 0
		for k, in := range e.Input {
			ids := tokensOf(in)
			tokens += len(ids)
			key := fmt.Sprint(ids, e.Dimensions)
			want, ok := refs[key]
			if !ok {
				vs, err := ref.Embed(ctx, [][]int32{ids}, engine.EmbedOptions{Dimensions: e.Dimensions})
				if err != nil {
					t.Fatal(err)
				}
				want, refs[key] = vs[0], vs[0]
			}
			if !slices.EqualFunc(res.Embeddings[k], want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("job %s input %d: the vector differs from the engine's for the input alone", j.id, k)
			}
		}
		if res.Usage.InputTokens != tokens {
			t.Fatalf("job %s: usage counts %d input tokens, the inputs have %d", j.id, res.Usage.InputTokens, tokens)
		}
	}
	for id, code := range bad {
		res := wait(t, b.Client, id)
		if res.Status != contracts.StatusFailed || res.Error == nil || res.Error.Code != code {
			t.Errorf("bad job %s: %+v, want failed %s", id, res, code)
		}
	}
	b.WaitDrained(t)
	// One usage record per job that ran, of the right kind.
	kinds := map[string]contracts.JobKind{}
	for _, tenant := range []string{b.Client.Tenant(), b.Other.Tenant()} {
		for _, m := range workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject(tenant)) {
			var u contracts.Usage
			if err := json.Unmarshal(m.Data(), &u); err != nil {
				t.Fatal(err)
			}
			if _, dup := kinds[u.JobID]; dup {
				t.Fatalf("two usage records for %s", u.JobID)
			}
			kinds[u.JobID] = u.Kind
		}
	}
	for _, j := range jobs {
		want := contracts.KindEmbedding
		if j.gen {
			want = ""
		}
		if k, ok := kinds[j.id]; !ok || k != want {
			t.Fatalf("job %s: usage kind %q (recorded: %v), want %q", j.id, k, ok, want)
		}
	}
}

// TestEmbeddingResultTooLarge: an embedding job whose vectors could not fit
// in one NATS message fails at once with request_too_large, naming how
// many inputs fit, and is not redelivered; a job that fits, beside it,
// completes.
func TestEmbeddingResultTooLarge(t *testing.T) {
	t.Parallel()
	b := workertest.SetupOptions(t, contracts.StreamsConfig{}, &natstest.Options{MaxPayload: 64 << 10})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{}), worker.Config{ID: "w1", Concurrency: 4})
	ctx := context.Background()
	job := func(n int) string {
		e := &contracts.EmbeddingRequest{}
		for i := 0; i < n; i++ {
			e.Input = append(e.Input, contracts.EmbeddingInput{Text: fmt.Sprintf("Once upon a time %d", i)})
		}
		id, err := b.Client.Submit(ctx, &contracts.JobRequest{Model: workertest.ModelName, Embedding: e}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	big, small := job(600), job(20)
	res := wait(t, b.Client, big)
	if res.Status != contracts.StatusFailed || res.Error == nil || res.Error.Code != contracts.CodeRequestTooLarge || !strings.Contains(res.Error.Message, "at most") || res.Attempt != 1 {
		t.Fatalf("600 vectors over a 64 KiB max payload: %+v", res)
	}
	if res := wait(t, b.Client, small); res.Status != contracts.StatusCompleted || len(res.Embeddings) != 20 {
		t.Fatalf("20 vectors: %+v", res)
	}
	b.WaitDrained(t)
}
