package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestModelsSayEmbeddingOnly: a model the live workers announce as
// embedding only (an encoder) is listed with the embeddings capability
// alone; a decoder with chat and embeddings.
func TestModelsSayEmbeddingOnly(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	ctx := context.Background()
	kv, err := b.Srv.JS.KeyValue(ctx, contracts.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	info, _ := json.Marshal(contracts.WorkerInfo{WorkerID: "w1", Models: []contracts.WorkerModel{
		{Name: "stories260k", ContextTokens: 512}, {Name: "bge-small", ContextTokens: 512, EmbeddingOnly: true}}, StartedAt: now, UpdatedAt: now})
	if _, err := kv.Put(ctx, contracts.ModelToken("w1"), info); err != nil {
		t.Fatal(err)
	}
	gw, f := startGateway(t, b, gateway.Config{})
	t.Cleanup(func() { gw.Close() })
	want := map[string][]string{"stories260k": {"chat", "embeddings"}, "bge-small": {"embeddings"}}
	natstest.Until(t, 10*time.Second, "/v1/models lists both models with their capabilities", func() bool {
		_, body := f.do(ctx, "GET", "/v1/models", "key-acme", "")
		var list struct {
			Data []struct {
				ID           string   `json:"id"`
				Capabilities []string `json:"capabilities"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &list) != nil || len(list.Data) != len(want) {
			return false
		}
		for _, m := range list.Data {
			if !slices.Equal(m.Capabilities, want[m.ID]) {
				return false
			}
		}
		return true
	})
	// A chat for the encoder is refused at submit, naming what it does.
	resp, body := f.do(ctx, "POST", "/v1/chat/completions", "key-acme", `{"model":"bge-small","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "embedding model") {
		t.Errorf("a chat for an embedding-only model: %d %s", resp.StatusCode, body)
	}
}
