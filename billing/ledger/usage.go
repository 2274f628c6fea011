package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/zerolayer/zerolayer/billing/price"
	"github.com/zerolayer/zerolayer/contracts"
)

// usageRow is a usage record to store: the decoded record, its message
// body as received and the stream sequence of its delivery (0: none).
type usageRow struct {
	u         contracts.Usage
	raw       []byte
	streamSeq uint64
}

// Record stores u as the ingester stores a record from ZL_USAGE, in one
// transaction on db: the usage row (its body, u as JSON), unless a record
// of tenant's job is stored already, and, when rc is not nil, the job that
// rates it (RateArgs). It reports whether it stored the row. It is for
// usage that does not come through ZL_USAGE (a backfill, a test); with rc
// nil the record stays unrated until a RateArgs job names it. u must be a
// valid record (contracts.Usage.Validate and CheckUsageInvariants, which
// Record checks).
func Record(ctx context.Context, db Beginner, rc *river.Client[pgx.Tx], u contracts.Usage) (bool, error) {
	if err := u.Validate(); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidUsage, err)
	}
	if err := CheckUsageInvariants(u); err != nil {
		return false, fmt.Errorf("%w: job %s: %w", ErrInvalidUsage, u.JobID, err)
	}
	raw, err := json.Marshal(u)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidUsage, err)
	}
	var stored bool
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		s, err := insertUsages(ctx, tx, []usageRow{{u: u, raw: raw}})
		if err != nil {
			return err
		}
		if stored = s[0]; !stored || rc == nil {
			return nil
		}
		_, err = rc.InsertTx(ctx, tx, RateArgs{Tenant: u.Tenant, JobID: u.JobID}, nil)
		return err
	})
	if err != nil {
		return false, err
	}
	return stored, nil
}

// insertUsages stores rows with one statement and reports, row by row,
// whether it stored it: a row whose job (of the same tenant) is stored
// already, or comes earlier in rows, is left out (ON CONFLICT DO NOTHING on
// the table's key), so that the first record of a job wins and a job is
// stored once. The rows' tenants are stored first (EnsureTenant). Rows are
// inserted in key order, so that two transactions storing the same jobs
// wait for each other instead of deadlocking.
func insertUsages(ctx context.Context, db DB, rows []usageRow) ([]bool, error) {
	stored := make([]bool, len(rows))
	first := make(map[JobRef]int, len(rows)) // a job's first row
	var tenants []string
	var cols usageColumns
	for i, r := range rows {
		key := JobRef{r.u.Tenant, r.u.JobID}
		if _, dup := first[key]; dup {
			continue
		}
		first[key] = i
		tenants = append(tenants, r.u.Tenant)
		cols.add(r)
	}
	if err := ensureTenants(ctx, db, tenants); err != nil {
		return nil, err
	}
	res, err := db.Query(ctx, `
		INSERT INTO usage (
			job_id, tenant_id, model, priority, bucket, status,
			input_tokens, output_tokens, cached_input_tokens,
			queue_ms, time_to_first_token_ms, time_per_token_ms,
			inter_token_ms_p50, inter_token_ms_p99, total_ms,
			tool_execution_time_ms, memory_allocated_mb,
			preemptions, recomputed_tokens, attempt,
			trace_id, worker_id, device, confidence,
			created_at, finished_at, raw, stream_seq, batch_id, custom_id, kind)
		SELECT job_id, tenant_id, model, priority, bucket, status,
			input_tokens, output_tokens, cached_input_tokens,
			queue_ms::numeric, ttft_ms::numeric, tpt_ms::numeric,
			p50_ms::numeric, p99_ms::numeric, total_ms::numeric,
			tool_ms::numeric, memory_mb::numeric,
			preemptions::integer, recomputed_tokens, attempt::integer,
			trace_id, worker_id, device, confidence::numeric,
			created_at, finished_at, raw::jsonb, stream_seq, NULLIF(batch_id, ''), NULLIF(custom_id, ''),
			coalesce(NULLIF(kind, ''), 'generation')
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::bigint[], $8::bigint[], $9::bigint[],
			$10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[],
			$18::bigint[], $19::bigint[], $20::bigint[],
			$21::text[], $22::text[], $23::text[], $24::text[],
			$25::timestamptz[], $26::timestamptz[], $27::text[], $28::bigint[], $29::text[], $30::text[], $31::text[])
			AS r(job_id, tenant_id, model, priority, bucket, status,
				input_tokens, output_tokens, cached_input_tokens,
				queue_ms, ttft_ms, tpt_ms, p50_ms, p99_ms, total_ms, tool_ms, memory_mb,
				preemptions, recomputed_tokens, attempt,
				trace_id, worker_id, device, confidence,
				created_at, finished_at, raw, stream_seq, batch_id, custom_id, kind)
		ORDER BY tenant_id, job_id
		ON CONFLICT (tenant_id, job_id) DO NOTHING
		RETURNING tenant_id, job_id`, cols.args()...)
	if err != nil {
		return nil, fmt.Errorf("billing: store %d usage records: %w", len(first), err)
	}
	var key JobRef
	_, err = pgx.ForEachRow(res, []any{&key.Tenant, &key.JobID}, func() error {
		stored[first[key]] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("billing: store %d usage records: %w", len(first), err)
	}
	return stored, nil
}

// usageColumns holds usage rows column by column, as insertUsages passes
// them (numeric columns as decimal text).
type usageColumns struct {
	jobID, tenant, model, priority, bucket, status  []string
	inputTokens, outputTokens, cachedTokens         []int64
	queue, ttft, tpt, p50, p99, total, tool, memory []string
	preemptions, recomputed, attempt                []int64
	traceID, workerID, device, confidence           []string
	createdAt, finishedAt                           []time.Time
	raw                                             []string
	streamSeq                                       []*int64
	batchID, customID                               []string
	kind                                            []string
}

func (c *usageColumns) add(r usageRow) {
	u := r.u
	dec := func(f float64) string { return price.FloatDecimal(f).String() }
	var seq *int64
	if r.streamSeq > 0 && r.streamSeq <= math.MaxInt64 {
		s := int64(r.streamSeq)
		seq = &s
	}
	c.jobID = append(c.jobID, u.JobID)
	c.tenant = append(c.tenant, u.Tenant)
	c.model = append(c.model, u.Model)
	c.priority = append(c.priority, string(u.Priority))
	c.bucket = append(c.bucket, string(u.Bucket))
	c.status = append(c.status, string(u.Status))
	c.inputTokens = append(c.inputTokens, int64(u.InputTokens))
	c.outputTokens = append(c.outputTokens, int64(u.OutputTokens))
	c.cachedTokens = append(c.cachedTokens, int64(u.CachedInputTokens))
	c.queue = append(c.queue, dec(u.QueueMs))
	c.ttft = append(c.ttft, dec(u.TimeToFirstTokenMs))
	c.tpt = append(c.tpt, dec(u.TimePerTokenMs))
	c.p50 = append(c.p50, dec(u.InterTokenMsP50))
	c.p99 = append(c.p99, dec(u.InterTokenMsP99))
	c.total = append(c.total, dec(u.TotalMs))
	c.tool = append(c.tool, dec(u.ToolExecutionTimeMs))
	c.memory = append(c.memory, dec(u.MemoryAllocatedMB))
	c.preemptions = append(c.preemptions, int64(u.Preemptions))
	c.recomputed = append(c.recomputed, int64(u.RecomputedTokens))
	c.attempt = append(c.attempt, int64(u.Attempt))
	c.traceID = append(c.traceID, u.TraceID)
	c.workerID = append(c.workerID, u.WorkerID)
	c.device = append(c.device, u.Device)
	c.confidence = append(c.confidence, dec(u.Confidence))
	c.createdAt = append(c.createdAt, u.CreatedAt)
	c.finishedAt = append(c.finishedAt, u.FinishedAt)
	c.raw = append(c.raw, string(r.raw))
	c.streamSeq = append(c.streamSeq, seq)
	c.batchID = append(c.batchID, u.BatchID)
	c.customID = append(c.customID, u.CustomID)
	c.kind = append(c.kind, string(u.Kind))
}

// args returns the columns in insertUsages' parameter order.
func (c *usageColumns) args() []any {
	return []any{c.jobID, c.tenant, c.model, c.priority, c.bucket, c.status,
		c.inputTokens, c.outputTokens, c.cachedTokens,
		c.queue, c.ttft, c.tpt, c.p50, c.p99, c.total, c.tool, c.memory,
		c.preemptions, c.recomputed, c.attempt,
		c.traceID, c.workerID, c.device, c.confidence,
		c.createdAt, c.finishedAt, c.raw, c.streamSeq, c.batchID, c.customID, c.kind}
}

// GetUsage returns the stored usage record of tenant's job jobID, decoded
// from the message body kept with it, or an error wrapping ErrNotFound.
func GetUsage(ctx context.Context, db DB, tenant, jobID string) (contracts.Usage, error) {
	us, err := getUsages(ctx, db, []JobRef{{tenant, jobID}})
	if err != nil {
		return contracts.Usage{}, err
	}
	if us[0].err != nil {
		return contracts.Usage{}, us[0].err
	}
	return us[0].u, nil
}

// storedUsage is a stored usage record, or why it could not be read.
type storedUsage struct {
	u   contracts.Usage
	err error // wraps ErrNotFound when it is not stored
}

// getUsages reads the stored usage records of jobs with one query, in the
// order of jobs. A record not stored, or whose body does not decode, has
// its err set; the error returned is the query's.
func getUsages(ctx context.Context, db DB, jobs []JobRef) ([]storedUsage, error) {
	tenants, ids := make([]string, len(jobs)), make([]string, len(jobs))
	for i, j := range jobs {
		tenants[i], ids[i] = j.Tenant, j.JobID
	}
	rows, err := db.Query(ctx, `
		SELECT q.i, u.raw
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q(tenant_id, job_id, i)
		JOIN usage u USING (tenant_id, job_id)`, tenants, ids)
	if err != nil {
		return nil, fmt.Errorf("billing: read %d usage records: %w", len(jobs), err)
	}
	out := make([]storedUsage, len(jobs))
	found := make([]bool, len(jobs))
	var i int
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&i, &raw}, func() error {
		j := jobs[i-1]
		found[i-1] = true
		if err := json.Unmarshal(raw, &out[i-1].u); err != nil {
			out[i-1].err = fmt.Errorf("billing: decode stored usage of %s job %s: %w", j.Tenant, j.JobID, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("billing: read %d usage records: %w", len(jobs), err)
	}
	for i, j := range jobs {
		if !found[i] {
			out[i].err = fmt.Errorf("%w: usage of %s job %s", ErrNotFound, j.Tenant, j.JobID)
		}
	}
	return out, nil
}
