package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestBatchRidesOutANATSRestart: the NATS server restarts (down 2 s) in
// the middle of a 200-line batch; the batch runner and the worker ride it
// out: every line completes, none is marked failed, each job is billed
// once (one usage record).
func TestBatchRidesOutANATSRestart(t *testing.T) {
	t.Parallel()
	b := workertest.SetupOptions(t, contracts.StreamsConfig{}, &natstest.Options{Restartable: true})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	const lines = 200
	var in bytes.Buffer
	for i := range lines {
		raw, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("doc-%03d", i),
			"request": request(fmt.Sprintf("Once upon a time %d", i), 24, contracts.PriorityNormal)})
		in.Write(append(raw, '\n'))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var restart sync.Once
	restarted := make(chan struct{})
	var out bytes.Buffer
	counts, err := b.Client.RunBatch(ctx, &in, &out, producer.BatchOpts{ID: "nightly", Window: 64, Progress: func(c producer.BatchCounts) {
		if c.Completed >= 40 {
			restart.Do(func() {
				go func() {
					defer close(restarted)
					b.Srv.Restart(t, 2*time.Second)
				}()
			})
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-restarted
	if counts.Completed != lines || counts.Failed != 0 || counts.Canceled != 0 || counts.Invalid != 0 {
		t.Fatalf("counts %+v", counts)
	}
	for _, r := range records(t, &out) {
		if r.Error != nil || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
			t.Fatalf("line %s: %+v %+v", r.CustomID, r.Result, r.Error)
		}
	}
	b.WaitDrained(t)
	if n := len(workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))); n != lines {
		t.Fatalf("%d usage records for %d jobs", n, lines)
	}
}

// TestWaitAcrossARestart: a Wait in progress when the server restarts
// returns the job's result, not the connection's error; a Wait for a job
// never submitted is not_found, not a wait until its context ends; a
// Submit while the server is down is unavailable (retryable).
func TestWaitAcrossARestart(t *testing.T) {
	t.Parallel()
	b := workertest.SetupOptions(t, contracts.StreamsConfig{}, &natstest.Options{Restartable: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	start := time.Now()
	_, err := b.Client.Wait(ctx, "never-submitted")
	var ce *contracts.Error
	if !errors.As(err, &ce) || ce.Code != contracts.CodeNotFound || time.Since(start) > 10*time.Second {
		t.Fatalf("Wait for a job never submitted: %v after %v", err, time.Since(start))
	}

	// No worker yet: the job waits in the queue across the restart.
	id, err := b.Client.Submit(ctx, request("Once upon a time", 8, contracts.PriorityNormal), nil)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		res, err := b.Client.Wait(ctx, id)
		if err == nil && res.Status != contracts.StatusCompleted {
			err = fmt.Errorf("status %s", res.Status)
		}
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond)
	b.Srv.Server.Shutdown()
	b.Srv.Server.WaitForShutdown()
	natstest.Until(t, 5*time.Second, "the client to see the server gone", func() bool { return !b.Srv.Conn.IsConnected() })
	_, err = b.Client.Submit(ctx, request("Once upon a time", 8, contracts.PriorityNormal), nil)
	if !errors.As(err, &ce) || ce.Code != contracts.CodeUnavailable || !ce.Retryable() {
		t.Errorf("Submit while the server is down: %v", err)
	}
	b.Srv.Restart(t, time.Second)
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	if err := <-waited; err != nil {
		t.Fatalf("Wait across the restart: %v", err)
	}
}
