package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
)

// TestFollow: Follow hands the job's events to fn in order on the calling
// goroutine and returns nil after the terminal one; an error of fn stops
// the following and is returned.
func TestFollow(t *testing.T) {
	t.Parallel()
	srv := natstest.Run(t)
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
	for i, typ := range []contracts.EventType{contracts.EventStarted, contracts.EventDelta, contracts.EventDelta, contracts.EventFinal} {
		ev := contracts.Event{Type: typ, JobID: "job-1", Tenant: "acme", Seq: uint64(i + 1), Attempt: 1, Time: time.Now().UTC()}
		if typ == contracts.EventFinal {
			ev.StopReason, ev.Usage = contracts.StopEndTurn, &contracts.Usage{OutputTokens: 2}
		}
		b, _ := json.Marshal(ev)
		if _, err := srv.JS.Publish(ctx, contracts.EventsSubject("acme", "job-1"), b); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	if err := c.Follow(ctx, "job-1", func(ev contracts.Event) error {
		seqs = append(seqs, ev.Seq)
		return nil
	}); err != nil || len(seqs) != 4 || seqs[0] != 1 || seqs[3] != 4 {
		t.Fatalf("Follow: %v, seqs %v", err, seqs)
	}
	stop := errors.New("enough")
	n := 0
	if err := c.Follow(ctx, "job-1", func(ev contracts.Event) error {
		n++
		return stop
	}); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Follow stopped by fn: %v after %d events", err, n)
	}
}
