package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// conversation is one multi-turn chat of the affinity tests: each turn
// appends the reply before it and a new question.
type conversation struct {
	req     *contracts.JobRequest
	workers []string // the worker of each turn
	cached  []int    // its cached input tokens
}

// turn submits c's next turn as tenant acme, waits for it and appends its
// reply.
func (c *conversation) turn(t *testing.T, b *workertest.Bundle, question string) *contracts.Result {
	t.Helper()
	c.req.ID = ""
	c.req.Messages = append(c.req.Messages, contracts.Message{Role: contracts.RoleUser, Content: question})
	id, err := b.Client.Submit(context.Background(), c.req, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := wait(t, b.Client, id)
	if r.Status != contracts.StatusCompleted || r.Usage == nil {
		t.Fatalf("turn %d: %+v", len(c.workers)+1, r)
	}
	c.workers = append(c.workers, r.Usage.WorkerID)
	c.cached = append(c.cached, r.Usage.CachedInputTokens)
	c.req.Messages = append(c.req.Messages, contracts.Message{Role: contracts.RoleAssistant, Content: r.Text})
	return r
}

func newConversation(i int) *conversation {
	zero := 0.0
	return &conversation{req: &contracts.JobRequest{Model: workertest.ModelName, MaxTokens: 24, Temperature: &zero,
		System: fmt.Sprintf("You tell story %d about a cat named Tom who lived in a big red house.", i)}}
}

// TestPrefixAffinity: two workers of one model, twelve conversations of
// four turns at once. A turn after the first runs on the worker that ran
// the turn before it (it holds the conversation's KV prefix), not on
// whichever pulled it first, and finds the prefix cached.
func TestPrefixAffinity(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	m1, m2 := worker.NewMetrics(), worker.NewMetrics()
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{KVBlocks: 512}), worker.Config{ID: "w1", Concurrency: 16, Metrics: m1})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{KVBlocks: 512}), worker.Config{ID: "w2", Concurrency: 16, Metrics: m2})
	convs := make([]*conversation, 12)
	var wg sync.WaitGroup
	for i := range convs {
		convs[i] = newConversation(i)
		wg.Go(func() {
			for _, q := range []string{"Once upon a time", "What did Tom see?", "Then what?", "How did it end?"} {
				convs[i].turn(t, b, q)
			}
		})
	}
	wg.Wait()
	same, later, cached := 0, 0, 0
	for _, c := range convs {
		for k := 1; k < len(c.workers); k++ {
			later++
			if c.workers[k] == c.workers[k-1] {
				same++
			}
			if c.cached[k] > 0 {
				cached++
			}
		}
	}
	passed := m1.AffinityJobs("passed_on") + m2.AffinityJobs("passed_on")
	taken := m1.AffinityJobs("taken") + m2.AffinityJobs("taken")
	t.Logf("%d of %d later turns on the worker of the turn before, %d with cached input tokens; passed on %.0f, taken %.0f, stolen %.0f",
		same, later, cached, passed, taken, m1.AffinityJobs("stolen")+m2.AffinityJobs("stolen"))
	// Without affinity each later turn lands on either worker: about half.
	if same < later*9/10 {
		t.Errorf("%d of %d later turns ran where the turn before ran; want at least 90%%", same, later)
	}
	if passed == 0 || taken < passed {
		t.Errorf("passed on %.0f jobs, taken %.0f: want jobs passed on and each taken by its holder", passed, taken)
	}
	if cached < later*9/10 {
		t.Errorf("%d of %d later turns found their prefix cached", cached, later)
	}
}

// TestPrefixAffinityNoPin: a job is not pinned to its holder. A holder
// whose batch is full leaves it in its queue, where the other worker takes
// it after Config.AffinityWait; a holder gone is no holder.
func TestPrefixAffinityNoPin(t *testing.T) {
	t.Parallel()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	m1 := worker.NewMetrics()
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{KVBlocks: 512}), worker.Config{ID: "w1", Concurrency: 8, Metrics: m1, AffinityWait: 300 * time.Millisecond})
	// w2 runs one job at a time.
	w2, _ := b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{KVBlocks: 512, MaxRunning: 1}), worker.Config{ID: "w2", Concurrency: 1, AffinityWait: 300 * time.Millisecond})
	// Three conversations whose first turns ran on w2.
	var held []*conversation
	for i := 0; len(held) < 3; i++ {
		if i == 60 {
			t.Fatal("60 first turns, not three on w2")
		}
		x := newConversation(100 + i)
		x.turn(t, b, "Once upon a time")
		if x.workers[0] == "w2" {
			held = append(held, x)
		}
	}
	c := held[0]
	// Fill w2 with a job held long by its constraint (the next turn of a
	// conversation it holds, so passed on to it whoever pulls it), then
	// the next turn.
	long := *held[2].req
	long.ID, long.MaxTokens = "", 6000
	long.Messages = append(long.Messages, contracts.Message{Role: contracts.RoleUser, Content: "Tell a long story"})
	long.ResponseFormat = &contracts.ResponseFormat{Type: contracts.FormatRegex, Pattern: strings.Repeat("[a-z ]{1000}", 8)}
	longID, err := b.Other.Submit(context.Background(), &long, nil)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Until(t, 10*time.Second, "w2 runs the long job", func() bool { return worker.Running(w2) > 0 })
	start := time.Now()
	r := c.turn(t, b, "What did Tom see?")
	t.Logf("with its holder full: ran on %s after %v (queue %.0f ms); stolen %.0f", c.workers[1], time.Since(start), r.Usage.QueueMs, m1.AffinityJobs("stolen"))
	if c.workers[1] != "w1" || m1.AffinityJobs("stolen") < 1 {
		t.Errorf("a turn whose holder is full ran on %s (stolen %.0f); want w1, taken from w2's queue", c.workers[1], m1.AffinityJobs("stolen"))
	}
	if err := b.Other.Cancel(context.Background(), longID); err != nil {
		t.Fatal(err)
	}
	// The holder gone: the other conversation's next turn runs on w1,
	// not passed on to w2's queue.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w2.Stop(ctx)
	before := m1.AffinityJobs("passed_on")
	c = held[1]
	c.turn(t, b, "Then what?")
	if c.workers[1] != "w1" || m1.AffinityJobs("passed_on") != before {
		t.Errorf("with w2 gone the turn ran on %s, %.0f jobs passed on", c.workers[1], m1.AffinityJobs("passed_on")-before)
	}
}
