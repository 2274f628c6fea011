package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestEmbeddingsSplitAcrossJobs: under a small NATS max_payload, a request
// of more inputs than one job's result can carry runs as several jobs
// (their ids in the job id header), answered as one, every vector in
// order and equal to the input's alone; the Go client's Embed does the
// same.
func TestEmbeddingsSplitAcrossJobs(t *testing.T) {
	t.Parallel()
	b := workertest.SetupOptions(t, contracts.StreamsConfig{}, &natstest.Options{MaxPayload: 64 << 10})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{}), worker.Config{ID: "w1", Concurrency: 4})
	gw, f := startGateway(t, b, gateway.Config{})
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()
	texts := make([]string, 300)
	for i := range texts {
		texts[i] = fmt.Sprintf("Once upon a time %d", i)
	}
	body, _ := json.Marshal(map[string]any{"model": workertest.ModelName, "input": texts})
	resp, out := f.do(ctx, "POST", "/v1/embeddings", "key-acme", string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("300 inputs: %d %s", resp.StatusCode, out)
	}
	ids := strings.Split(resp.Header.Get(gateway.JobIDHeader), ",")
	var got struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Data) != len(texts) || len(ids) < 2 {
		t.Fatalf("%d vectors for %d inputs in %d jobs (%v)", len(got.Data), len(texts), len(ids), err)
	}
	c, err := producer.New(b.Srv.Conn, producer.Config{Tenant: "acme", Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	viaGo, err := c.Embed(ctx, workertest.ModelName, producer.TextInputs(texts...), nil)
	if err != nil || len(viaGo.Vectors) != len(texts) || len(viaGo.JobIDs) < 2 || viaGo.Usage.InputTokens != got.Usage.PromptTokens {
		t.Fatalf("Client.Embed: %v (%d vectors)", err, len(viaGo.Vectors))
	}
	same := func(a, b []float32) bool {
		return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
	}
	for _, i := range []int{0, 1, len(texts) / 2, len(texts) - 1} {
		alone, err := c.Embed(ctx, workertest.ModelName, producer.TextInputs(texts[i]), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Data[i].Index != i || !same(got.Data[i].Embedding, alone.Vectors[0]) || !same(viaGo.Vectors[i], alone.Vectors[0]) {
			t.Fatalf("input %d: the split request's vector differs from the input's alone", i)
		}
	}
}
