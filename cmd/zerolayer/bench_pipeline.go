package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/worker"
)

// benchStack starts a dev stack serving mc in a temporary folder for a
// benchmark, with a producer for tenant "bench"; done stops and removes it.
func benchStack(ctx context.Context, name string, mc worker.ModelsConfig, sf *schedFlags) (*devstack.Stack, *producer.Client, func(), error) {
	dir, err := os.MkdirTemp("", "zerolayer-bench-"+name+"-")
	if err != nil {
		return nil, nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	st, err := startStack(ctx, devstack.Config{Dir: dir, DatabaseURL: os.Getenv("DATABASE_URL"), Models: mc, Logger: log}, sf)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	c, err := producer.New(st.Conn(), producer.Config{Tenant: "bench", Models: st.Models().Paths()})
	if err != nil {
		stopStack(st)
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return st, c, func() { c.Close(); stopStack(st); os.RemoveAll(dir) }, nil
}

// benchPipeline pushes n one-token jobs through the whole dev stack (submit
// → JetStream → worker → usage → Postgres → River rating) and reports jobs
// per second end to end and the queue's share of time to first token.
func benchPipeline(ctx context.Context, n int, mc worker.ModelsConfig, sf *schedFlags, out io.Writer) error {
	st, c, done, err := benchStack(ctx, "pipeline", mc, sf)
	if err != nil {
		return err
	}
	defer done()
	name := st.Models().Names()[0]
	ids := make([]string, n)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	const submitters = 4
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += submitters {
				req := &contracts.JobRequest{Model: name, MaxTokens: 1, Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}},
					Priority: contracts.Priorities()[i%3]}
				id, err := c.Submit(ctx, req, nil)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ids[i] = id
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	submitted := time.Since(start)
	deadline := time.Now().Add(10 * time.Minute)
	var rated int
	for {
		if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM charges WHERE job_id = ANY($1)", ids).Scan(&rated); err != nil {
			return err
		}
		if rated == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d jobs rated after 10 minutes", rated, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	total := time.Since(start)
	var ranFor, ingestedFor float64
	if err := st.Pool().QueryRow(ctx, `SELECT extract(epoch FROM max(finished_at) - $2::timestamptz)::float8, extract(epoch FROM max(ingested_at) - $2::timestamptz)::float8
		FROM usage WHERE job_id = ANY($1)`, ids, start).Scan(&ranFor, &ingestedFor); err != nil {
		return err
	}
	rows, err := st.Pool().Query(ctx, "SELECT queue_ms::float8, time_to_first_token_ms::float8 FROM usage WHERE job_id = ANY($1)", ids)
	if err != nil {
		return err
	}
	var queue, ttft, e2e []float64
	for rows.Next() {
		var q, t float64
		if err := rows.Scan(&q, &t); err != nil {
			return err
		}
		queue, ttft, e2e = append(queue, q), append(ttft, t), append(e2e, q+t)
	}
	rows.Close()
	for _, s := range [][]float64{queue, ttft, e2e} {
		sort.Float64s(s)
	}
	pct := func(s []float64, q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	fmt.Fprintf(out, "pipeline: %d jobs (max_tokens 1) submitted in %.2f s (%.0f jobs/s), all rated after %.2f s: %.1f jobs/s end to end\n",
		n, submitted.Seconds(), float64(n)/submitted.Seconds(), total.Seconds(), float64(n)/total.Seconds())
	fmt.Fprintf(out, "stages: last job finished by the worker after %.2f s, last usage stored after %.2f s\n", ranFor, ingestedFor)
	fmt.Fprintf(out, "queue time (JetStream store → admission) ms: p50 %.2f  p99 %.2f\n", pct(queue, 0.5), pct(queue, 0.99))
	fmt.Fprintf(out, "time to first token after admission ms:       p50 %.2f  p99 %.2f\n", pct(ttft, 0.5), pct(ttft, 0.99))
	fmt.Fprintf(out, "queue + first token ms:                        p50 %.2f  p99 %.2f\n", pct(e2e, 0.5), pct(e2e, 0.99))

	// Unloaded: one job at a time, so the queue time is the pipeline's own
	// overhead (fetch, decode, hand-off), not a backlog.
	queue = queue[:0]
	for i := 0; i < min(n, 200); i++ {
		id, err := c.Submit(ctx, &contracts.JobRequest{Model: name, MaxTokens: 1, Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}}, nil)
		if err != nil {
			return err
		}
		res, err := c.Wait(ctx, id)
		if err != nil {
			return err
		}
		queue = append(queue, res.Usage.QueueMs)
	}
	sort.Float64s(queue)
	fmt.Fprintf(out, "unloaded (%d jobs one at a time) queue time ms: p50 %.2f  p99 %.2f\n", len(queue), pct(queue, 0.5), pct(queue, 0.99))
	return nil
}
