package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestStreamedDeltasAreCoalesced: through a real worker, a streaming
// job's deltas add up to its result (text and token ids) exactly, its
// first token comes in a delta of its own, and its tokens, which come
// faster than DeltaInterval (an hour here), travel in fewer events than
// tokens.
func TestStreamedDeltasAreCoalesced(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorkerConfig(t, workertest.NewExecutor(t), worker.Config{ID: "w1", DeltaTokens: 8, DeltaInterval: time.Hour})
	req := greedy("Once upon a time", 40, contracts.PriorityNormal)
	req.Stream, req.Logprobs = true, true
	id, err := b.Client.Submit(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, b.Client, id)
	evs := events(t, b.Client, id)
	text, final := checkEvents(t, evs)
	var ids []int32
	var deltas, lps int
	for _, ev := range evs {
		if ev.Type != contracts.EventDelta {
			continue
		}
		if deltas == 0 && len(ev.TokenIDs) != 1 {
			t.Errorf("first delta carries %d tokens: want the first token alone", len(ev.TokenIDs))
		}
		if len(ev.TokenIDs) > 8 {
			t.Errorf("a delta carries %d tokens, above DeltaTokens 8", len(ev.TokenIDs))
		}
		deltas++
		ids = append(ids, ev.TokenIDs...)
		lps += len(ev.Logprobs)
	}
	if final.Type != contracts.EventFinal || text != res.Text || !slices.Equal(ids, res.TokenIDs) || lps != len(res.TokenIDs) {
		t.Fatalf("deltas %q %v (%d logprobs), result %q %v", text, ids, lps, res.Text, res.TokenIDs)
	}
	if len(res.TokenIDs) < 10 || deltas >= len(res.TokenIDs) {
		t.Fatalf("%d delta events for %d tokens: want them coalesced", deltas, len(res.TokenIDs))
	}
}
