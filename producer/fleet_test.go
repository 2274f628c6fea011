package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

// TestSubmitChecksTheFleet: with no worker live, a job for any model is
// queued (it waits); once a worker announces its models in ZL_WORKERS, a
// job for a model no live worker serves, nor served lately (ZL_MODELS), is
// refused with unknown_model naming the served models, unless it asks to
// wait (wait_for_model); ServedOnly's list gives way to the live fleet's;
// when the worker leaves, jobs are queued again.
func TestSubmitChecksTheFleet(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := context.Background()
	strict, err := producer.New(srv.Conn, producer.Config{Tenant: "acme", Models: map[string]string{"listed": "/nonexistent.gguf"}, ServedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	req := func(model string, wait bool) *contracts.JobRequest {
		return &contracts.JobRequest{Model: model, WaitForModel: wait, Messages: []contracts.Message{{Role: "user", Content: "hi"}}}
	}
	if _, err := c.Submit(ctx, req("qwen3-s-f32", false), nil); err != nil {
		t.Fatalf("no worker live: %v", err)
	}

	workers, err := srv.JS.KeyValue(ctx, contracts.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	models, err := srv.JS.KeyValue(ctx, contracts.ModelsBucket)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	w1, _ := json.Marshal(contracts.WorkerInfo{WorkerID: "w1", Models: []contracts.WorkerModel{{Name: "stories260k", ContextTokens: 512, KVArenaMB: 16}}, StartedAt: now, UpdatedAt: now})
	if _, err := workers.Put(ctx, contracts.ModelToken("w1"), w1); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(contracts.ModelRecord{Model: "qwen3-s-f32", WorkerID: "w0", ServedAt: now})
	if _, err := models.Put(ctx, contracts.ModelToken("qwen3-s-f32"), rec); err != nil {
		t.Fatal(err)
	}
	var refusal error
	// The worker and the model record are two watches: wait for both.
	natstest.Until(t, 10*time.Second, "the client sees the live worker and the model served lately", func() bool {
		if _, refusal = c.Submit(ctx, req("gpt-9", false), nil); refusal == nil {
			return false
		}
		_, err := c.Submit(ctx, req("qwen3-s-f32", false), nil)
		return err == nil
	})
	var ce *contracts.Error
	if !errors.Is(refusal, contracts.CodeUnknownModel) || !errors.As(refusal, &ce) || ce.HTTPStatus() != 404 ||
		!strings.Contains(ce.Message, "stories260k") || !strings.Contains(ce.Message, "wait_for_model") {
		t.Fatalf("a model nobody serves while a worker is live: %v", refusal)
	}
	for _, tc := range []struct {
		model string
		wait  bool
	}{{"stories260k", false}, {"qwen3-s-f32", false}, {"gpt-9", true}} {
		if _, err := c.Submit(ctx, req(tc.model, tc.wait), nil); err != nil {
			t.Errorf("%s (wait %v): %v", tc.model, tc.wait, err)
		}
	}
	// ServedOnly: the live fleet's models count, the listed one is not
	// served.
	natstest.Until(t, 10*time.Second, "the strict client sees the live worker", func() bool {
		_, err := strict.Submit(ctx, req("stories260k", false), nil)
		return err == nil
	})
	if _, err := strict.Submit(ctx, req("listed", false), nil); !errors.Is(err, contracts.CodeUnknownModel) {
		t.Errorf("ServedOnly, a listed model no live worker serves: %v", err)
	}

	if err := workers.Delete(ctx, contracts.ModelToken("w1")); err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 10*time.Second, "the worker's leaving seen", func() bool {
		_, err := c.Submit(ctx, req("gpt-9", false), nil)
		return err == nil
	})
	// The strict client follows the fleet with a watch of its own: once it
	// too has seen the worker leave, its list decides again.
	natstest.Until(t, 10*time.Second, "ServedOnly with no worker live refuses a model it does not list", func() bool {
		_, err := strict.Submit(ctx, req("stories260k", false), nil)
		return errors.Is(err, contracts.CodeUnknownModel)
	})
}
