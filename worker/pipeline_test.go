package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/shopspring/decimal"

	"github.com/zerolayer/zerolayer/billing"
	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/migrations/dbtest"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestPipelineEndToEnd runs 50 jobs from two tenants across every priority
// and bucket through JetStream, a worker on the real model, and billing
// into Postgres, then checks every job's events, result, usage row and
// charge against the formula computed here by hand.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	b := workertest.Setup(t, contracts.StreamsConfig{})
	startBilling(t, pool, b)
	ctx := context.Background()
	b.StartWorker(t, workertest.NewExecutor(t), "w1")

	prompts := map[contracts.Bucket]string{
		contracts.BucketShort:  "Once upon a time",
		contracts.BucketMedium: strings.Repeat("The little dog ran in the park. ", 12),
		contracts.BucketLong:   strings.Repeat("Tom and Sue played with a big red ball in the sun. ", 40),
	}
	type job struct {
		id, tenant string
		prio       contracts.Priority
		bucket     contracts.Bucket
		max        int
	}
	var jobs []job
	for i := 0; i < 50; i++ {
		j := job{prio: contracts.Priorities()[i%3], bucket: contracts.AllBuckets()[(i/3)%3], max: 2 + i%7}
		c := b.Client
		if i%2 == 1 {
			c = b.Other
		}
		j.tenant = c.Tenant()
		req := request(prompts[j.bucket], j.max, j.prio)
		req.Stream = i%4 == 0
		if i == 7 {
			req.MaxTokens = 230 // long enough to earn effective_service if the model is confident
		}
		id, err := c.Submit(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		j.id = id
		if i == 7 {
			j.max = 230
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		c := b.Client
		if j.tenant != c.Tenant() {
			c = b.Other
		}
		res := wait(t, c, j.id)
		if res.Status != contracts.StatusCompleted {
			t.Fatalf("job %s: %+v", j.id, res)
		}
		text, final := checkEvents(t, events(t, c, j.id))
		if text != res.Text || final.Type != contracts.EventFinal {
			t.Fatalf("job %s: deltas %q vs result %q", j.id, text, res.Text)
		}
		if res.Usage.Priority != j.prio || res.Usage.Bucket != j.bucket {
			t.Fatalf("job %s: routed %s/%s, want %s/%s", j.id, res.Usage.Priority, res.Usage.Bucket, j.prio, j.bucket)
		}
	}
	// Billing: every job rated exactly once.
	natstest.Until(t, 30*time.Second, "every job charged", func() bool {
		var n int
		pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&n)
		return n == len(jobs)
	})
	var usageRows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM usage").Scan(&usageRows); err != nil || usageRows != 50 {
		t.Fatalf("%d usage rows, want 50 (%v)", usageRows, err)
	}
	pIn, pOut, pTTFT, pTool := decimal.RequireFromString("0.000003"), decimal.RequireFromString("0.000015"), decimal.RequireFromString("0.0000002"), decimal.RequireFromString("0.0000001")
	for _, j := range jobs {
		var in, out int64
		var ttft, tool, conf decimal.Decimal
		err := pool.QueryRow(ctx, `SELECT input_tokens, output_tokens, time_to_first_token_ms, tool_execution_time_ms, confidence FROM usage WHERE tenant_id = $1 AND job_id = $2`, j.tenant, j.id).
			Scan(&in, &out, &ttft, &tool, &conf)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := billing.GetCharge(ctx, pool, j.tenant, j.id)
		if err != nil {
			t.Fatal(err)
		}
		want := decimal.NewFromInt(in).Mul(pIn).Add(decimal.NewFromInt(out).Mul(pOut)).Add(ttft.Mul(pTTFT)).Add(tool.Mul(pTool))
		if !ch.Cost.Total.Equal(want) || !ch.Cost.Input.Equal(decimal.NewFromInt(in).Mul(pIn)) || !ch.Cost.TTFT.Equal(ttft.Mul(pTTFT)) {
			t.Errorf("job %s: charge %v, by hand %v (in %d out %d ttft %v)", j.id, ch.Cost, want, in, out, ttft)
		}
		var tags []string
		if ttft.GreaterThan(decimal.NewFromInt(50)) {
			tags = append(tags, "high_latency_risk")
		}
		if tool.GreaterThan(decimal.NewFromInt(1)) {
			tags = append(tags, "tool_optimization_needed")
		}
		if out > 200 && conf.GreaterThan(decimal.RequireFromString("0.95")) {
			tags = append(tags, "effective_service")
		}
		slices.Sort(tags)
		if !slices.Equal(tags, ch.Tags) && !(len(tags) == 0 && len(ch.Tags) == 0) {
			t.Errorf("job %s: tags %v, rules say %v", j.id, ch.Tags, tags)
		}
	}
	// The report adds up to the charges.
	rep, err := billing.BuildReport(ctx, pool, "acme", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var sum decimal.Decimal
	rows, _ := pool.Query(ctx, "SELECT total FROM charges WHERE tenant_id = 'acme'")
	for rows.Next() {
		var d decimal.Decimal
		rows.Scan(&d)
		sum = sum.Add(d)
	}
	rows.Close()
	if rep.Total.Jobs != 25 || !rep.Total.Cost.Total.Equal(sum) {
		t.Fatalf("report: %d jobs, total %v; charges sum %v", rep.Total.Jobs, rep.Total.Cost.Total, sum)
	}
}

// TestBilledOnce covers the ways a job could be billed twice: a duplicate
// submit, a redelivery after a crash, and a cancel (billed for what ran).
func TestBilledOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	b := workertest.Setup(t, contracts.StreamsConfig{AckWait: 2 * time.Second})
	svc := startBilling(t, pool, b)
	ctx := context.Background()
	// A worker that dies mid-job (connection closed, no ack).
	gate := newGate(workertest.NewExecutor(t), 2)
	_, nc1 := b.StartWorker(t, gate, "doomed")
	crash := request("Once upon a time", 12, contracts.PriorityNormal)
	crash.ID = "crash-job"
	if _, err := b.Client.Submit(ctx, crash, nil); err != nil {
		t.Fatal(err)
	}
	<-gate.reached
	nc1.Close()
	defer close(gate.release)
	b.StartWorker(t, workertest.NewExecutor(t), "survivor")

	dup := request("The little dog", 6, contracts.PriorityHigh)
	dup.ID = "dup-job"
	for i := 0; i < 3; i++ {
		if _, err := b.Client.Submit(ctx, dup, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"crash-job", "dup-job"} {
		if res := wait(t, b.Client, id); res.Status != contracts.StatusCompleted {
			t.Fatalf("%s: %+v", id, res)
		}
	}
	natstest.Until(t, 30*time.Second, "both jobs charged", func() bool {
		var n int
		pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&n)
		return n == 2
	})
	var attempt, out int
	if err := pool.QueryRow(ctx, "SELECT attempt, output_tokens FROM usage WHERE job_id = 'crash-job'").Scan(&attempt, &out); err != nil || attempt != 2 || out != 12 {
		t.Fatalf("crash-job usage: attempt %d, %d tokens (%v)", attempt, out, err)
	}
	// A usage record delivered again under another message id (past the
	// dedupe window, or replayed by an operator) bills nothing new.
	recs := workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme"))
	if len(recs) != 2 {
		t.Fatalf("%d usage records on the stream, want 2", len(recs))
	}
	for i, m := range recs {
		msg := nats.NewMsg(m.Subject())
		msg.Data = m.Data()
		msg.Header.Set(contracts.HeaderMsgID, fmt.Sprintf("replay-%d", i))
		if _, err := b.Srv.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Until(t, 30*time.Second, "the replayed records seen as duplicates", func() bool { return svc.Ingester().Stats().Duplicates >= 2 })
	var rows, charges int
	pool.QueryRow(ctx, "SELECT count(*) FROM usage").Scan(&rows)
	pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&charges)
	if rows != 2 || charges != 2 {
		t.Fatalf("after a replay: %d usage rows and %d charges, want 2 and 2", rows, charges)
	}
}

// startBilling runs the billing service (ingester and River) for a test.
func startBilling(t *testing.T, pool *pgxpool.Pool, b *workertest.Bundle) *billing.Service {
	t.Helper()
	svc, err := billing.NewService(billing.Config{DB: pool, JetStream: b.Srv.JS, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Stop(sctx)
	})
	return svc
}
