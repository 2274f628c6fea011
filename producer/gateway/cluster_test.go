package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// clusterLines is how many lines a cluster batch test runs.
const clusterLines = 200

// TestClusterGatewayBatch runs a 200-line native batch through a gateway
// with R3 batch buckets, R3 streams on a three-node cluster and two
// workers: every line completes, in order, each job billed once.
func TestClusterGatewayBatch(t *testing.T) {
	t.Parallel()
	runClusterBatch(t, false)
}

// TestClusterGatewayBatchLeaderLoss is TestClusterGatewayBatch with the
// node leading ZL_JOBS shut down once a third of the lines have completed,
// and restarted a moment later: the batch still ends with every line
// completed and no job billed twice.
func TestClusterGatewayBatchLeaderLoss(t *testing.T) {
	t.Parallel()
	runClusterBatch(t, true)
}

func runClusterBatch(t *testing.T, loseLeader bool) {
	b := workertest.SetupCluster(t, contracts.StreamsConfig{Replicas: 3, AckWait: 3 * time.Second})
	for _, id := range []string{"w1", "w2"} {
		b.StartWorkerConfig(t, workertest.NewSchedExecutor(t, sched.Config{MaxRunning: 16}), worker.Config{ID: id, Concurrency: 16})
	}
	gw, err := gateway.New(b.Conn, gateway.Config{Keys: plainKeys(t, "key-acme", "acme"), Replicas: 3,
		Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	f := &gatewayFixture{t: t, url: srv.URL}
	ctx := context.Background()

	// The batch buckets are replicated as the streams.
	b.RequireR3(t, "KV_"+gateway.BatchStates, "OBJ_"+gateway.BatchFiles)

	var in strings.Builder
	for i := range clusterLines {
		fmt.Fprintf(&in, `{"custom_id":"l-%03d","request":{"model":"stories260k","messages":[{"role":"user","content":"Once upon a time %d"}],"max_tokens":%d}}`+"\n", i, i, 2+i%5)
	}
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=cb", "key-acme", in.String()); resp.StatusCode != 202 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if loseLeader {
		var st gateway.BatchState
		natstest.Until(t, 30*time.Second, "a third of the lines completed", func() bool {
			_, body := f.do(ctx, "GET", "/v1/zl/batches/cb", "key-acme", "")
			return json.Unmarshal(body, &st) == nil && st.Counts.Completed >= clusterLines/3
		})
		down := b.Cluster.NodeIndex(b.StreamInfo(t, contracts.StreamJobs).Cluster.Leader)
		if down < 0 {
			t.Fatal("no leader of ZL_JOBS")
		}
		t.Logf("shutting down node-%d, leader of ZL_JOBS, at %+v", down, st.Counts)
		b.Cluster.Shutdown(t, down)
		time.Sleep(2 * time.Second) // the node stays down a while, as a crashed one would
		b.Cluster.Restart(t, down)
	}
	st := f.waitBatch(ctx, "cb")
	if st.Error != "" || st.Counts != (producer.BatchCounts{Total: clusterLines, Completed: clusterLines}) {
		t.Fatalf("ended batch %+v", st)
	}
	resp, body := f.do(ctx, "GET", "/v1/zl/batches/cb/output", "key-acme", "")
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != 200 || len(lines) != clusterLines {
		t.Fatalf("output: %d, %d lines", resp.StatusCode, len(lines))
	}
	for i, l := range lines {
		var rec producer.BatchRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.CustomID != fmt.Sprintf("l-%03d", i) || rec.Result == nil ||
			rec.Result.Status != contracts.StatusCompleted || rec.Result.Usage.OutputTokens != 2+i%5 {
			t.Fatalf("output line %d: %s (%v)", i, l, err)
		}
	}

	// One usage record per line's job, none other.
	b.WaitDrained(t)
	usage := map[string]int{}
	for _, m := range workertest.StreamMsgs(t, b.JS, contracts.StreamUsage, contracts.SubjectUsageAll) {
		var u contracts.Usage
		if err := json.Unmarshal(m.Data(), &u); err != nil {
			t.Fatal(err)
		}
		usage[u.Tenant+"/"+u.JobID]++
	}
	for i := range clusterLines {
		key := "acme/" + producer.BatchJobID("cb", fmt.Sprintf("l-%03d", i))
		if usage[key] != 1 {
			t.Errorf("job %s: %d usage records, want 1", key, usage[key])
		}
	}
	if len(usage) != clusterLines {
		t.Errorf("%d jobs billed, want %d", len(usage), clusterLines)
	}
}
