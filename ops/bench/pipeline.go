package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/ops/devstack"
	"github.com/zerolayer/zerolayer/producer"
)

// Tenant is the tenant the dev-stack benchmarks submit as.
const Tenant = "bench"

// PipelineConfig configures Pipeline.
type PipelineConfig struct {
	// Jobs is the number of one-token jobs submitted at once. Required.
	Jobs int
	// Unloaded is the number of jobs then run one at a time. Defaults to
	// min(Jobs, 1000).
	Unloaded int
	// Limits gives Tenant limits too high to refuse anything, so that every
	// job goes through every check (rate windows, jobs in flight, spend
	// estimate) at submit, as the gateway does, and at the worker: the
	// cost of the checks on intake throughput (limits.go). Defaults to
	// false: the tenant has no limits (a map look-up per job).
	Limits bool
}

// PipelineResults are the measurements of Pipeline. Latencies are in
// milliseconds, sorted.
type PipelineResults struct {
	Jobs int
	// Submitted is how long submitting took, Rated how long until every
	// job was rated (both from the first submit).
	Submitted, Rated time.Duration
	// Finished and Ingested are the seconds from the first submit until
	// the worker finished the last job and billing stored its usage.
	Finished, Ingested float64
	// Queue is JetStream store to admission, FirstToken admission to the
	// first token, and QueueFirstToken their sum, per job.
	Queue, FirstToken, QueueFirstToken []float64
	// UnloadedQueue is the queue time of jobs run one at a time.
	UnloadedQueue []float64
}

// Pipeline pushes cfg.Jobs one-token jobs through the whole dev stack
// (submit → JetStream → worker → usage → Postgres → River rating) as
// tenant Tenant, then runs jobs one at a time, and writes jobs per second
// end to end and the queue's share of time to first token to w.
func Pipeline(ctx context.Context, st *devstack.Stack, cfg PipelineConfig, w io.Writer) (_ *PipelineResults, err error) {
	if cfg.Jobs <= 0 {
		return nil, fmt.Errorf("bench: pipeline of %d jobs: want 1 or more", cfg.Jobs)
	}
	if cfg.Unloaded == 0 {
		cfg.Unloaded = min(cfg.Jobs, 1000)
	}
	pc := producer.Config{Tenant: Tenant, Models: st.Models().Paths()}
	if cfg.Limits {
		if pc.Admitter, err = setHighLimits(ctx, st); err != nil {
			return nil, err
		}
	}
	c, err := producer.New(st.Conn(), pc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	name := st.Models().Names()[0]
	res := &PipelineResults{Jobs: cfg.Jobs}
	start := time.Now()
	ids, err := submitOneTokenJobs(ctx, c, name, cfg.Jobs)
	if err != nil {
		return nil, err
	}
	res.Submitted = time.Since(start)
	if err := waitCharged(ctx, st, ids, 10*time.Minute); err != nil {
		return nil, err
	}
	res.Rated = time.Since(start)
	if err := res.readUsage(ctx, st, ids, start); err != nil {
		return nil, err
	}
	n, pct := cfg.Jobs, percentile
	fmt.Fprintf(w, "pipeline: %d jobs (max_tokens 1, tenant limits checked: %v) submitted in %.2f s (%.0f jobs/s), all rated after %.2f s: %.1f jobs/s end to end\n",
		n, cfg.Limits, res.Submitted.Seconds(), float64(n)/res.Submitted.Seconds(), res.Rated.Seconds(), float64(n)/res.Rated.Seconds())
	fmt.Fprintf(w, "stages: last job finished by the worker after %.2f s, last usage stored after %.2f s\n", res.Finished, res.Ingested)
	fmt.Fprintf(w, "queue time (JetStream store → admission) ms: p50 %.2f  p99 %.2f\n", pct(res.Queue, 0.5), pct(res.Queue, 0.99))
	fmt.Fprintf(w, "time to first token after admission ms:       p50 %.2f  p99 %.2f\n", pct(res.FirstToken, 0.5), pct(res.FirstToken, 0.99))
	fmt.Fprintf(w, "queue + first token ms:                        p50 %.2f  p99 %.2f\n", pct(res.QueueFirstToken, 0.5), pct(res.QueueFirstToken, 0.99))

	// Unloaded: one job at a time, so the queue time is the pipeline's own
	// overhead (fetch, decode, hand-off), not a backlog.
	for i := 0; i < cfg.Unloaded; i++ {
		id, err := c.Submit(ctx, oneTokenJob(name, contracts.PriorityNormal), nil)
		if err != nil {
			return nil, err
		}
		r, err := c.Wait(ctx, id)
		if err != nil {
			return nil, err
		}
		res.UnloadedQueue = append(res.UnloadedQueue, r.Usage.QueueMs)
	}
	sort.Float64s(res.UnloadedQueue)
	q := res.UnloadedQueue
	fmt.Fprintf(w, "unloaded (%d jobs one at a time) queue time ms: p50 %.2f  p99 %.2f  max %.2f\n", len(q), pct(q, 0.5), pct(q, 0.99), pct(q, 1))
	return res, nil
}

// oneTokenJob is the pipeline's job: one token of a short prompt.
func oneTokenJob(model string, p contracts.Priority) *contracts.JobRequest {
	return &contracts.JobRequest{Model: model, MaxTokens: 1, Messages: []contracts.Message{{Role: "user", Content: "Once upon a time"}}, Priority: p}
}

// submitOneTokenJobs submits n one-token jobs from four goroutines, the
// priorities in turn, and returns their ids in order.
func submitOneTokenJobs(ctx context.Context, c *producer.Client, model string, n int) ([]string, error) {
	reqs := make([]*contracts.JobRequest, n)
	for i := range reqs {
		reqs[i] = oneTokenJob(model, contracts.Priorities()[i%3])
	}
	ids, errs := c.SubmitMany(ctx, reqs, nil)
	return ids, errors.Join(errs...)
}

// fanOut calls fn(0) … fn(n-1) from four goroutines, each taking every
// fourth index (so submissions keep roughly their order), and returns the
// first error.
func fanOut(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	const submitters = 4
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += submitters {
				if err := fn(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	return firstErr
}

// waitCharged polls until billing has rated every job of ids.
func waitCharged(ctx context.Context, st *devstack.Stack, ids []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var rated int
		if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM charges WHERE job_id = ANY($1)", ids).Scan(&rated); err != nil {
			return err
		}
		if rated == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d jobs rated after %v", rated, len(ids), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readUsage reads the stage times and the latencies of the jobs' usage.
func (r *PipelineResults) readUsage(ctx context.Context, st *devstack.Stack, ids []string, start time.Time) error {
	if err := st.Pool().QueryRow(ctx, `SELECT extract(epoch FROM max(finished_at) - $2::timestamptz)::float8, extract(epoch FROM max(ingested_at) - $2::timestamptz)::float8
		FROM usage WHERE job_id = ANY($1)`, ids, start).Scan(&r.Finished, &r.Ingested); err != nil {
		return err
	}
	rows, err := st.Pool().Query(ctx, "SELECT queue_ms::float8, time_to_first_token_ms::float8 FROM usage WHERE job_id = ANY($1)", ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var q, t float64
		if err := rows.Scan(&q, &t); err != nil {
			return err
		}
		r.Queue, r.FirstToken, r.QueueFirstToken = append(r.Queue, q), append(r.FirstToken, t), append(r.QueueFirstToken, q+t)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range [][]float64{r.Queue, r.FirstToken, r.QueueFirstToken} {
		sort.Float64s(s)
	}
	return nil
}
