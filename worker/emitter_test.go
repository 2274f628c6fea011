package worker

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

// emitterEvents returns a streaming job's emitter publishing through a
// real JetStream with cfg, and a func returning the delta events
// published so far, in order.
func emitterEvents(t *testing.T, cfg Config) (*emitter, func() []contracts.Event) {
	t.Helper()
	s := natstest.Run(t)
	if err := contracts.EnsureStreams(context.Background(), s.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	ref := contracts.JobRef{Tenant: "acme", JobID: "coalesced"}
	var mu sync.Mutex
	var evs []contracts.Event
	sub, err := s.Conn.Subscribe(contracts.EventsSubject(ref.Tenant, ref.JobID), func(m *nats.Msg) {
		var ev contracts.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := s.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	w := &Worker{nc: s.Conn, js: s.JS, cfg: cfg.WithDefaults()}
	em := &emitter{w: w, ref: ref, attempt: 1, stream: true}
	t.Cleanup(func() {
		em.flush()
		if err := em.wait(); err != nil {
			t.Error(err)
		}
	})
	return em, func() []contracts.Event {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(evs)
	}
}

// TestEmitterCoalescesStreamedDeltas: a streaming job's first token goes
// out alone and at once; the rest in events of up to DeltaTokens tokens,
// which add up to the whole output (text, reasoning, ids, logprobs), in
// seq order, flushed before the final event.
func TestEmitterCoalescesStreamedDeltas(t *testing.T) {
	t.Parallel()
	em, events := emitterEvents(t, Config{DeltaTokens: 4, DeltaInterval: time.Hour})
	var text, reasoning strings.Builder
	var ids []int32
	var lps []contracts.TokenLogprob
	for i := range 10 {
		tok := string(rune('a' + i))
		lp := contracts.TokenLogprob{Token: tok, Logprob: -float64(i)}
		if i%3 == 0 {
			em.Reasoning("r" + tok)
			reasoning.WriteString("r" + tok)
		}
		em.Delta(tok, []int32{int32(i)}, []contracts.TokenLogprob{lp})
		text.WriteString(tok)
		ids, lps = append(ids, int32(i)), append(lps, lp)
		if i == 0 {
			// Not held for DeltaInterval (an hour).
			natstest.Until(t, 10*time.Second, "the first delta", func() bool { return len(events()) == 1 })
			if got := events()[0]; got.Text != "a" || !slices.Equal(got.TokenIDs, []int32{0}) {
				t.Fatalf("first delta %q %v: want the first token alone", got.Text, got.TokenIDs)
			}
		}
	}
	em.publish(&contracts.Event{Type: contracts.EventFinal}) // flushes what is pending first
	natstest.Until(t, 10*time.Second, "the final event", func() bool {
		evs := events()
		return len(evs) > 0 && evs[len(evs)-1].Type == contracts.EventFinal
	})
	evs := events()
	var gotText, gotReasoning strings.Builder
	var gotIDs []int32
	var gotLps []contracts.TokenLogprob
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.Attempt != 1 {
			t.Fatalf("event %d: seq %d attempt %d", i, ev.Seq, ev.Attempt)
		}
		if ev.Type != contracts.EventDelta {
			continue
		}
		if len(ev.TokenIDs) > 4 {
			t.Errorf("event %d carries %d tokens, above DeltaTokens 4", i, len(ev.TokenIDs))
		}
		gotText.WriteString(ev.Text)
		gotReasoning.WriteString(ev.Reasoning)
		gotIDs, gotLps = append(gotIDs, ev.TokenIDs...), append(gotLps, ev.Logprobs...)
	}
	if gotText.String() != text.String() || gotReasoning.String() != reasoning.String() || !slices.Equal(gotIDs, ids) || !reflect.DeepEqual(gotLps, lps) {
		t.Fatalf("deltas add up to %q %q %v %v, want %q %q %v %v", gotText.String(), gotReasoning.String(), gotIDs, gotLps, text.String(), reasoning.String(), ids, lps)
	}
	if deltas := len(evs) - 1; deltas >= len(ids) {
		t.Errorf("%d delta events for %d tokens: want them coalesced", deltas, len(ids))
	}
}

// TestEmitterTimerFlushesPendingDelta: a token held for DeltaInterval is
// published by the timer when no further token comes.
func TestEmitterTimerFlushesPendingDelta(t *testing.T) {
	t.Parallel()
	em, events := emitterEvents(t, Config{DeltaTokens: 16, DeltaInterval: 20 * time.Millisecond})
	em.Delta("Once", []int32{1}, nil)
	em.Delta(" upon", []int32{2}, nil)
	em.Delta(" a", []int32{3}, nil)
	natstest.Until(t, 10*time.Second, "the pending delta, flushed by the timer", func() bool {
		n := 0
		for _, ev := range events() {
			n += len(ev.TokenIDs)
		}
		return n == 3
	})
	var text strings.Builder
	for _, ev := range events() {
		text.WriteString(ev.Text)
	}
	if text.String() != "Once upon a" {
		t.Fatalf("deltas add up to %q", text.String())
	}
	// A token after the pause goes out too (at once, or by the timer).
	em.Delta(" time", []int32{4}, nil)
	natstest.Until(t, 10*time.Second, "the token after the pause", func() bool {
		evs := events()
		return len(evs) > 0 && slices.Equal(evs[len(evs)-1].TokenIDs, []int32{4})
	})
}
