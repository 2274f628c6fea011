package producer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

// TestEventsAcrossARestart: Events following a job when the NATS server
// restarts goes on after it, with every event once and in order, until
// the terminal one; done then returns nil.
func TestEventsAcrossARestart(t *testing.T) {
	t.Parallel()
	srv := natstest.RunWithOptions(t, &natstest.Options{Restartable: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := contracts.EnsureStreams(ctx, srv.JS, contracts.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := producer.New(srv.Conn, producer.Config{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	publish := func(seq uint64, typ contracts.EventType, text string) {
		t.Helper()
		ev := contracts.Event{Type: typ, JobID: "job-1", Tenant: "acme", Seq: seq, Attempt: 1, Time: time.Now().UTC(), Text: text}
		if typ == contracts.EventFinal {
			ev.StopReason = contracts.StopEndTurn
			ev.Usage = &contracts.Usage{OutputTokens: 2}
		}
		b, _ := json.Marshal(ev)
		for {
			// Retried while the server comes back.
			if _, err := srv.JS.PublishMsg(ctx, &nats.Msg{Subject: contracts.EventsSubject("acme", "job-1"), Data: b}); err == nil {
				return
			} else if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	publish(1, contracts.EventStarted, "")
	publish(2, contracts.EventDelta, "Once")
	events, done, err := c.Events(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []contracts.Event
	for len(got) < 2 {
		got = append(got, <-events)
	}
	srv.Restart(t, time.Second)
	publish(3, contracts.EventDelta, " upon")
	publish(4, contracts.EventFinal, "Once upon")
	for ev := range events {
		got = append(got, ev)
	}
	if err := done(); err != nil {
		t.Fatalf("done: %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("%d events: %+v", len(got), got)
	}
	for i, ev := range got {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %+v", i, ev.Seq, got)
		}
	}
}
